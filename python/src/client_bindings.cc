// ps._native.client: PsClient (client/ps_client.h) and CheckpointSync
// (client/checkpoint_sync.h) for Python. Tables are named by id here;
// ps/client.py resolves names, allocates outputs and accepts torch tensors.
//
// Every call that waits (connect, push, pull, clock, barrier, checkpoint)
// releases the GIL, so other Python threads (a data loader, the next batch's
// prefetch) run meanwhile. Replies that are protobuf messages come back as
// JSON text (ps/client.py turns them into dicts).
#include <google/protobuf/util/json_util.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/checkpoint_sync.h"
#include "client/distinct_keys.h"
#include "client/ps_client.h"
#include "core/auth.h"
#include "core/context_environment.h"
#include "core/transport_name.h"
#include "kernels/sparse_accumulate.h"
#include "python/src/array_args.h"
#include "python/src/bindings.h"
#include "python/src/status_error.h"

namespace ps::python {
namespace {

using worker::CheckpointSync;
using worker::PendingOp;
using worker::PsClient;

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  if (auto s =
          google::protobuf::util::MessageToJsonString(message, &json, options);
      !s.ok()) {
    ThrowIfError(Status(StatusCode::kInternal,
                        "reply not convertible to JSON: " + s.ToString()));
  }
  return json;
}

// A table's spec as JSON; None for a table the servers do not serve.
py::object SpecJson(const proto::TableSpec* spec) {
  if (spec == nullptr) return py::none();
  return py::str(ToJson(*spec));
}

// A started push or pull: the C++ handle and the arrays its transfers read
// or write, kept referenced until it completed.
class PendingCall {
 public:
  PendingCall(PendingOp op, py::object result, std::vector<py::object> keep)
      : op_(std::move(op)),
        result_(std::move(result)),
        keep_(std::move(keep)) {}
  PendingCall(const PendingCall&) = delete;
  PendingCall& operator=(const PendingCall&) = delete;
  ~PendingCall() {
    py::gil_scoped_release release;
    (void)op_.Wait();
  }

  // Blocks until the call completed; returns its result (the pulled array,
  // or None) or raises its error. May be called again: same answer.
  py::object Wait() {
    Status status;
    {
      py::gil_scoped_release release;
      status = op_.Wait();
    }
    keep_.clear();
    ThrowIfError(status);
    return result_;
  }

 private:
  PendingOp op_;
  py::object result_;
  std::vector<py::object> keep_;
};

StatusOr<xfer::ClusterSecret> SecretOf(const std::optional<py::bytes>& secret,
                                       const std::string& secret_file) {
  if (secret.has_value()) {
    return xfer::ClusterSecret::FromBytes(std::string(*secret));
  }
  return xfer::ClusterSecret::Resolve(secret_file, environ);
}

std::unique_ptr<PsClient> Connect(std::vector<std::string> servers,
                                  uint32_t worker_id, uint32_t num_workers,
                                  const std::string& transport, int timeout_ms,
                                  const std::optional<py::bytes>& secret,
                                  const std::string& secret_file,
                                  std::string listen_host,
                                  std::string advertise_host) {
  PsClient::Options o;
  o.servers = std::move(servers);
  o.worker_id = worker_id;
  o.num_workers = num_workers;
  o.xfer.transport = ValueOrThrow(xfer::TransportChoiceFromName(transport));
  o.xfer.peer_timeout_ms = timeout_ms;
  o.xfer.secret = ValueOrThrow(SecretOf(secret, secret_file));
  o.xfer.listen_host = std::move(listen_host);
  o.xfer.advertise_host = std::move(advertise_host);
  o.xfer = ValueOrThrow(xfer::ApplyEnvironment(std::move(o.xfer), environ));
  py::gil_scoped_release release;
  return ValueOrThrow(PsClient::Connect(o));
}

void BindPsClient(py::module_ m) {
  py::class_<PsClient>(m, "PsClient")
      .def(py::init(&Connect), py::arg("servers"), py::arg("worker_id"),
           py::arg("num_workers"), py::arg("transport"), py::arg("timeout_ms"),
           py::arg("secret"), py::arg("secret_file"), py::arg("listen_host"),
           py::arg("advertise_host"))
      .def_property_readonly("worker_id", &PsClient::worker_id)
      .def_property_readonly("num_workers", &PsClient::num_workers)
      .def_property_readonly("num_servers", &PsClient::num_servers)
      .def_property_readonly("clock", &PsClient::clock)
      .def("table_json",
           [](const PsClient& c, const std::string& name) {
             return SpecJson(c.table(name));
           })
      .def("table_json",
           [](const PsClient& c, uint32_t id) { return SpecJson(c.table(id)); })
      .def("push",
           [](PsClient& c, uint32_t table, const py::array& keys,
              const py::array& grads) {
             auto k = KeyInput(keys);
             auto g = FloatInput(grads, "grads");
             Released([&] { return c.Push(table, k, g); });
           })
      .def("push_async",
           [](PsClient& c, uint32_t table, py::array keys, py::array grads) {
             auto k = KeyInput(keys);
             auto g = FloatInput(grads, "grads");
             PendingOp op;
             {
               py::gil_scoped_release release;
               op = c.PushAsync(table, k, g);
             }
             return std::make_unique<PendingCall>(
                 std::move(op), py::none(),
                 std::vector<py::object>{keys, grads});
           })
      .def("pull_async",
           [](PsClient& c, uint32_t table, py::array keys, py::array out) {
             auto k = KeyInput(keys);
             auto o = FloatOutput(out, "out");
             PendingOp op;
             {
               py::gil_scoped_release release;
               op = c.PullAsync(table, k, o);
             }
             return std::make_unique<PendingCall>(
                 std::move(op), out, std::vector<py::object>{keys});
           })
      .def("push_dense",
           [](PsClient& c, uint32_t table, const py::array& grads) {
             auto g = FloatInput(grads, "grads");
             Released([&] { return c.PushDense(table, g); });
           })
      .def("pull_dense",
           [](PsClient& c, uint32_t table, py::array out) {
             auto o = FloatOutput(out, "out");
             Released([&] { return c.PullDense(table, o); });
           })
      .def("flush_residuals",
           [](PsClient& c, uint32_t table) {
             Released([&] { return c.FlushResiduals(table); });
           })
      .def("wait_applied",
           [](PsClient& c) { Released([&] { return c.WaitApplied(); }); })
      .def("barrier",
           [](PsClient& c) { Released([&] { return c.Barrier(); }); })
      .def("clock_step",
           [](PsClient& c) {
             return ReleasedValue<uint64_t>([&] { return c.Clock(); });
           })
      .def("min_clock",
           [](PsClient& c) {
             return ReleasedValue<uint64_t>([&] { return c.MinClock(); });
           })
      .def("stats_json", [](PsClient& c, uint32_t shard) {
        auto reply =
            ReleasedValue<proto::StatsReply>([&] { return c.Stats(shard); });
        return ToJson(reply);
      });

  py::class_<PendingCall>(m, "PendingCall")
      .def("wait", &PendingCall::Wait,
           "Blocks until the call completed; returns the pulled array (None "
           "for a push) or raises the call's error.");
}

// (distinct keys in order of first appearance, uint64; the index of each
// key's distinct key, int32): what a torch embedding pulls and how it maps
// the batch back onto the pulled rows, in O(n) (torch.unique sorts).
py::tuple Distinct(const py::array& keys) {
  std::span<const uint64_t> k = KeyInput(keys);
  if (k.size() > INT32_MAX) ThrowInvalidArgument("more than 2^31 keys");
  std::vector<uint64_t> distinct;
  std::vector<int32_t> inverse(k.size());
  {
    py::gil_scoped_release release;
    std::vector<uint32_t> table;
    worker::DistinctKeys d(k.size(), &table, &distinct);
    for (size_t j = 0; j < k.size(); ++j) inverse[j] = d.Insert(k[j]);
  }
  return py::make_tuple(ToArray(std::move(distinct)),
                        ToArray(std::move(inverse)));
}

// The gradient of the distinct rows from the gradient of every looked-up
// row: out[inverse[i]] += grads[i] ((count, dim) float32), the backward of
// a gather, without torch's sort.
py::array_t<float> SumRows(const py::array& inverse, const py::array& grads,
                           uint64_t count, uint32_t dim) {
  auto index = InputSpan<int32_t>(inverse, "inverse", "int32");
  auto g = FloatInput(grads, "grads");
  if (g.size() != index.size() * dim) {
    ThrowInvalidArgument(std::to_string(g.size()) + " gradient values for " +
                         std::to_string(index.size()) + " rows of dim " +
                         std::to_string(dim));
  }
  py::array_t<float> out(
      {static_cast<py::ssize_t>(count), static_cast<py::ssize_t>(dim)});
  std::span<float> o = FloatOutput(out, "out");
  Status s;
  {
    py::gil_scoped_release release;
    std::fill(o.begin(), o.end(), 0.0f);
    s = kernels::AccumulateRows(
        {reinterpret_cast<const uint32_t*>(index.data()), index.size()}, g,
        {o.data(), count, dim}, kernels::AccumulateMode::kExclusive);
  }
  ThrowIfError(s);
  return out;
}

void BindCheckpointSync(py::module_ m) {
  py::class_<CheckpointSync>(m, "CheckpointSync")
      .def(py::init([](PsClient* client) {
             return ValueOrThrow(CheckpointSync::Create(client));
           }),
           py::keep_alive<1, 2>())
      .def("info_json",
           [](CheckpointSync& s) {
             auto reply = ReleasedValue<proto::CheckpointReply>(
                 [&] { return s.Info(); });
             return ToJson(reply);
           })
      .def("due",
           [](CheckpointSync& s, uint64_t step) {
             return ReleasedValue<bool>([&] { return s.Due(step); });
           })
      .def("checkpoint", [](CheckpointSync& s, uint64_t step, uint64_t epoch,
                            uint64_t consumed) {
        auto r = ReleasedValue<worker::CheckpointResult>(
            [&] { return s.Checkpoint(step, epoch, consumed); });
        py::dict d;
        d["copy_ms"] = r.copy_ms;
        d["previous_step"] = r.previous_step;
        d["previous_failed"] = r.previous_failed;
        d["previous_error"] = r.previous_error;
        d["consecutive_failures"] = r.consecutive_failures;
        d["newest_complete_step"] = r.newest_complete_step;
        return d;
      });
}

}  // namespace

void BindClient(py::module_ m) {
  BindPsClient(m);
  BindCheckpointSync(m);
  m.def("distinct", &Distinct, py::arg("keys"));
  m.def("sum_rows", &SumRows, py::arg("inverse"), py::arg("grads"),
        py::arg("count"), py::arg("dim"));
}

}  // namespace ps::python
