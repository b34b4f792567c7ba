// ps._native.serving: ServingClient (serving/serving_client.h) for Python;
// ps/serving.py resolves names, allocates outputs and accepts tensors.
// Lookups release the GIL while they wait.
#include <google/protobuf/util/json_util.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/auth.h"
#include "core/context_environment.h"
#include "core/transport_name.h"
#include "python/src/array_args.h"
#include "python/src/bindings.h"
#include "python/src/status_error.h"
#include "serving/serving_client.h"

namespace ps::python {
namespace {

using serving::ServingClient;

std::unique_ptr<ServingClient> Connect(std::vector<std::string> replicas,
                                       const std::string& transport,
                                       int timeout_ms,
                                       const std::optional<py::bytes>& secret,
                                       const std::string& secret_file,
                                       std::string listen_host,
                                       std::string advertise_host) {
  ServingClient::Options o;
  o.replicas = std::move(replicas);
  o.timeout_ms = timeout_ms;
  o.xfer.transport = ValueOrThrow(xfer::TransportChoiceFromName(transport));
  o.xfer.peer_timeout_ms = timeout_ms;
  o.xfer.secret = ValueOrThrow(
      secret.has_value() ? xfer::ClusterSecret::FromBytes(std::string(*secret))
                         : xfer::ClusterSecret::Resolve(secret_file, environ));
  o.xfer.listen_host = std::move(listen_host);
  o.xfer.advertise_host = std::move(advertise_host);
  o.xfer = ValueOrThrow(xfer::ApplyEnvironment(std::move(o.xfer), environ));
  py::gil_scoped_release release;
  return ValueOrThrow(ServingClient::Connect(o));
}

py::object SpecJson(const proto::TableSpec* spec) {
  if (spec == nullptr) return py::none();
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(*spec, &json, options);
  return py::str(json);
}

}  // namespace

void BindServing(py::module_ m) {
  py::class_<ServingClient>(m, "ServingClient")
      .def(py::init(&Connect), py::arg("replicas"), py::arg("transport"),
           py::arg("timeout_ms"), py::arg("secret"), py::arg("secret_file"),
           py::arg("listen_host"), py::arg("advertise_host"))
      .def("table_json",
           [](const ServingClient& c, const std::string& name) {
             return SpecJson(c.table(name));
           })
      .def_property_readonly("max_keys", &ServingClient::max_keys)
      .def_property_readonly("replica", &ServingClient::replica)
      // (step, created_unix_ms, missing, replica) of a lookup into `out`.
      .def("lookup", [](ServingClient& c, const std::string& table,
                        const py::array& keys, py::array out) {
        auto k = KeyInput(keys);
        auto o = FloatOutput(out, "out");
        std::optional<StatusOr<ServingClient::Result>> r;
        {
          py::gil_scoped_release release;
          r.emplace(c.Lookup(table, k, o));
        }
        ServingClient::Result v = ValueOrThrow(std::move(*r));
        return std::make_tuple(v.step, v.created_unix_ms, v.missing, v.replica);
      });
}

}  // namespace ps::python
