// kv_transfer: hands a transformer's KV cache from a prefill process to a
// decode process with one-sided transfers (core/), layer by layer, the
// decode side holding another slicing (a range of the heads) than prefill.
// One binary, two roles (--role); see --help and README.md.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/guarded_main.h"
#include "core/transport_name.h"
#include "examples/kv_transfer/decode.h"
#include "examples/kv_transfer/prefill.h"

DEFINE_string(role, "",
              "prefill (holds and sends the whole cache) or decode (receives "
              "its head range and checks every byte); start decode first");
DEFINE_string(peer_file, "",
              "the hand-off file: decode writes its address and region "
              "descriptors there, prefill waits for it and reads it");
DEFINE_uint64(layers, 4, "layers of the KV cache (both roles)");
DEFINE_uint64(tokens, 256, "tokens of the KV cache (both roles)");
DEFINE_uint64(heads, 8, "KV heads of the KV cache (both roles)");
DEFINE_uint64(head_dim, 128, "values per head, fp16 (both roles)");
DEFINE_uint64(heads_begin, 0, "decode: the first head it holds");
DEFINE_uint64(heads_end, 0,
              "decode: one past the last head it holds (0: --heads / 2, or 1 "
              "for a single head)");
DEFINE_string(transport, "auto",
              "auto, shm or tcp: how this process reaches its peer "
              "(127.0.0.1 only)");
DEFINE_uint64(seed, 1,
              "seed of the values' pattern; both roles must use the same "
              "(another makes decode report the bytes that differ)");
DEFINE_uint64(segments_per_op, 1024,
              "prefill: segments per WriteV, 1..65536 (the tcp wire's limit "
              "a request); a layer takes ceil(segments / this) WriteVs, a "
              "segment being one K/V and token's head range (merged where "
              "contiguous)");
DEFINE_bool(fill_per_layer, true,
            "prefill: write each layer's values just before sending it, as a "
            "model computing layer by layer; false: write the whole cache "
            "first, so that transfers move bytes only (what bench_kv.sh "
            "times)");
DEFINE_int32(copy_threads, 1,
             "prefill: threads that copy each same-host WriteV together, 1 "
             "(the sending thread alone) .. 64 (xfer::ContextOptions::"
             "copy_threads); more pays where cores are spare");
DEFINE_uint64(in_flight_layers, 2,
              "prefill: layers whose operations may be incomplete at once");
DEFINE_uint64(warmup, 0,
              "decode: untimed transfers before the timed ones (the first "
              "maps and faults in the pages)");
DEFINE_uint64(iterations, 1, "decode: timed transfers of the whole cache");
DEFINE_bool(verify, true, "decode: check every byte of every layer");
DEFINE_int32(timeout_ms, 30000,
             "the longest wait for the peer: decode's next layer, prefill's "
             "hand-off file and credits, an unanswered operation");

namespace ps::kv {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "kv_transfer: %s\n", message.c_str());
  return code;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Status CheckFlags(KvShape* shape, HeadRange* heads,
                  xfer::TransportChoice* transport) {
  if (FLAGS_role != "prefill" && FLAGS_role != "decode") {
    return InvalidArgument("--role must be prefill or decode, not '" +
                           FLAGS_role + "'");
  }
  if (FLAGS_peer_file.empty()) {
    return InvalidArgument(
        "--peer_file is required (the same path for both "
        "roles)");
  }
  *shape = {FLAGS_layers, FLAGS_tokens, FLAGS_heads, FLAGS_head_dim};
  if (Status s = ValidateShape(*shape); !s.ok()) {
    return InvalidArgument("--" + s.message());
  }
  const uint64_t end = FLAGS_heads_end != 0
                           ? FLAGS_heads_end
                           : std::max<uint64_t>(1, FLAGS_heads / 2);
  *heads = {FLAGS_heads_begin, end};
  if (FLAGS_role == "decode") {
    if (Status s = ValidateHeads(*shape, *heads); !s.ok()) {
      return InvalidArgument("--heads_begin/--heads_end: " + s.message());
    }
  }
  auto t = xfer::TransportChoiceFromName(FLAGS_transport);
  if (!t.ok()) return InvalidArgument("--transport " + t.status().message());
  *transport = *t;
  PS_RETURN_IF_ERROR(
      cli::CheckUintFlag("segments_per_op", FLAGS_segments_per_op, 1, 65536));
  PS_RETURN_IF_ERROR(
      cli::CheckUintFlag("in_flight_layers", FLAGS_in_flight_layers, 1, 4096));
  PS_RETURN_IF_ERROR(cli::CheckIntFlag("copy_threads", FLAGS_copy_threads, 1,
                                       xfer::ContextOptions::kMaxCopyThreads));
  PS_RETURN_IF_ERROR(cli::CheckUintFlag("warmup", FLAGS_warmup, 0, 1000));
  PS_RETURN_IF_ERROR(
      cli::CheckUintFlag("iterations", FLAGS_iterations, 1, 1000));
  PS_RETURN_IF_ERROR(
      cli::CheckIntFlag("timeout_ms", FLAGS_timeout_ms, 1, 3600000));
  return Status::OK();
}

int RunPrefillRole(const KvShape& shape, xfer::TransportChoice transport) {
  PrefillOptions o;
  o.peer_file = FLAGS_peer_file;
  o.shape = shape;
  o.transport = transport;
  o.seed = FLAGS_seed;
  o.segments_per_op = FLAGS_segments_per_op;
  o.fill_per_layer = FLAGS_fill_per_layer;
  o.in_flight_layers = FLAGS_in_flight_layers;
  o.copy_threads = FLAGS_copy_threads;
  o.timeout_ms = FLAGS_timeout_ms;
  StatusOr<PrefillReport> r = RunPrefill(o);
  if (!r.ok()) return Fail(kExitFailed, "prefill: " + r.status().ToString());
  return 0;
}

int RunDecodeRole(const KvShape& shape, const HeadRange& heads,
                  xfer::TransportChoice transport) {
  DecodeOptions o;
  o.peer_file = FLAGS_peer_file;
  o.shape = shape;
  o.heads = heads;
  o.transport = transport;
  o.seed = FLAGS_seed;
  o.warmup = FLAGS_warmup;
  o.iterations = FLAGS_iterations;
  o.verify = FLAGS_verify;
  o.timeout_ms = FLAGS_timeout_ms;
  StatusOr<DecodeReport> r = RunDecode(o);
  if (!r.ok()) return Fail(kExitFailed, "decode: " + r.status().ToString());
  std::vector<double> gbps, first_ms, all_ms, fraction;
  for (const TransferTimes& t : r->timed) {
    if (t.all_layers <= 0) continue;
    gbps.push_back(r->bytes_per_transfer / t.all_layers / 1e9);
    first_ms.push_back(t.first_layer * 1e3);
    all_ms.push_back(t.all_layers * 1e3);
    fraction.push_back(t.first_layer / t.all_layers);
  }
  std::printf("decode: %s every byte of %llu transfer(s) as expected\n",
              FLAGS_verify ? "checked:" : "not checked (--noverify);",
              static_cast<unsigned long long>(FLAGS_warmup + FLAGS_iterations));
  // Medians of the timed transfers, one per line, for scripts/bench_kv.sh.
  std::printf("RESULT kv_bytes %llu B\n",
              static_cast<unsigned long long>(r->bytes_per_transfer));
  std::printf("RESULT kv_gbps %.4f GB/s\n", Median(gbps));
  std::printf("RESULT kv_all_layers_ms %.4f ms\n", Median(all_ms));
  std::printf("RESULT kv_first_layer_ms %.4f ms\n", Median(first_ms));
  std::printf("RESULT kv_first_layer_fraction %.5f\n", Median(fraction));
  return 0;
}

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "hands a KV cache (layers x 2 x tokens x heads x head_dim, fp16) from "
      "a prefill process to a decode process that holds a range of its "
      "heads, layer by layer, over shm or tcp; decode checks every byte.\n"
      "  kv_transfer --role=decode --peer_file=/tmp/kv.handoff "
      "--heads_begin=0 --heads_end=4 &\n"
      "  kv_transfer --role=prefill --peer_file=/tmp/kv.handoff\n"
      "Both roles take the same --layers --tokens --heads --head_dim "
      "--seed. Times are measured from prefill's CLOCK_MONOTONIC stamp, so "
      "they hold when both run on one host.\n"
      "Exit status: 0 every byte arrived as expected, 1 failed (bytes "
      "differ, peer lost or silent for --timeout_ms), 2 bad usage.");
  // The core's INFO lines (listening, connected) only with --minloglevel=0.
  FLAGS_minloglevel = 1;
  if (Status s = cli::ParseFlags(&argc, &argv); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  KvShape shape;
  HeadRange heads;
  xfer::TransportChoice transport = xfer::TransportChoice::kAuto;
  if (Status s = CheckFlags(&shape, &heads, &transport); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  return FLAGS_role == "prefill" ? RunPrefillRole(shape, transport)
                                 : RunDecodeRole(shape, heads, transport);
}

}  // namespace
}  // namespace ps::kv

int main(int argc, char** argv) {
  return ps::cli::GuardedMain("kv_transfer",
                              [&] { return ps::kv::Main(argc, argv); });
}
