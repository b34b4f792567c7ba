// xfer_perf: bandwidth and latency of the xfer core between two processes,
// per transport, measured the way ucx_perftest measures UCX:
//   put_bw / get_bw  pipelined: a window of non-blocking operations, then
//                    Flush (puts) or Wait (gets); GB/s = 1e9 bytes/s.
//   put_lat          ping-pong of 8-byte puts polled on the target memory,
//                    as ucp_put_lat: the put's data is the sequence number,
//                    each side waits for it in its own region, then
//                    answers; half the round trip, median. A put that does
//                    not complete at once (tcp) is waited for after the
//                    answer arrived, so one is in flight per side.
//   put_notify_lat   the same with PutWithNotify (data, then a notify word
//                    on its own cache line); not in the default --tests.
//   fetch_add_lat    blocking FetchAdd64 round trip, median.
//   compare_swap_lat blocking CompareSwap64 round trip (each one swaps),
//                    median.
// Latency samples are timed as ucx_perftest times them: one read of the
// CPU's cycle counter after each call (a sample runs from the end of one
// call to the end of the next), converted to seconds with the counter's
// rate measured against steady_clock over the repetition. Two steady_clock
// reads around each call would add their own ~25 ns to a 60 ns one-way
// time on this VM (and about 5-10 ns to its median).
// The program forks its peer (before any context exists, so it forks a
// process without threads), talks to it over a socketpair, prints a table
// and one "RESULT name value unit" line per headline figure.
#include <gflags/gflags.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "cli/flags.h"
#include "core/context.h"
#include "core/context_environment.h"
#include "core/endpoint.h"
#include "core/transport_name.h"

DEFINE_string(transports, "shm,tcp",
              "transports to measure, comma-separated (shm, tcp, verbs)");
DEFINE_uint64(min_size, 8, "smallest message in bytes");
DEFINE_uint64(max_size, 16 << 20, "largest message in bytes");
DEFINE_uint64(size_step, 2, "factor between message sizes (a power of 2)");
DEFINE_uint64(window, 16, "non-blocking operations in flight per Flush");
DEFINE_int32(reps, 5, "repetitions per figure (the median is reported)");
DEFINE_double(rep_seconds, 0.2, "minimum duration of one bandwidth repetition");
DEFINE_int32(lat_iters, 20000, "ping-pong round trips per latency repetition");
DEFINE_int32(warmup, 1000, "warm-up round trips before latency repetitions");
DEFINE_int32(spin_before_yield, 2000000000,
             "polls of a flag before the poller starts yielding the CPU "
             "(default: never yield, as ucx_perftest polls)");
DEFINE_bool(rotate_buffers, false,
            "spread bandwidth operations over the whole local buffer and "
            "remote region instead of reusing one offset (as ucx_perftest "
            "does)");
DEFINE_int32(cpu_wakeup_latency_us, -1,
             "hold CPU wake-ups within this many us while measuring "
             "(ContextOptions::cpu_wakeup_latency_us; 0: idle CPUs poll; "
             "needs root); -1: leave the machine as it is");
DEFINE_bool(quick, false, "fewer repetitions and shorter runs (for CI)");
DEFINE_string(tests, "put_bw,get_bw,put_lat,fetch_add_lat,compare_swap_lat",
              "figures to measure, comma-separated: put_bw, get_bw, put_lat, "
              "put_notify_lat, fetch_add_lat, compare_swap_lat");

namespace ps::xfer {
namespace {

using Clock = std::chrono::steady_clock;

// The figures --tests selects (parsed once into a set of these).
enum class Test : unsigned {
  kPutBw = 1,
  kGetBw = 2,
  kPutLat = 4,
  kPutNotifyLat = 8,
  kFetchAddLat = 16,
  kCompareSwapLat = 32,
};
struct TestName {
  Test test;
  const char* name;
};
constexpr TestName kTests[] = {
    {Test::kPutBw, "put_bw"},
    {Test::kGetBw, "get_bw"},
    {Test::kPutLat, "put_lat"},
    {Test::kPutNotifyLat, "put_notify_lat"},
    {Test::kFetchAddLat, "fetch_add_lat"},
    {Test::kCompareSwapLat, "compare_swap_lat"},
};
using TestSet = unsigned;
bool Has(TestSet set, Test t) { return (set & static_cast<unsigned>(t)) != 0; }

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The cycle counter (x86's invariant TSC); elsewhere steady_clock's ticks.
uint64_t Ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(Clock::now().time_since_epoch().count());
#endif
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "xfer_perf: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Check(StatusOr<T> v, const char* what) {
  if (!v.ok()) Die(std::string(what) + ": " + v.status().ToString());
  return std::move(v).value();
}
void Check(const Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

// Line-based control channel over one end of a socketpair.
class Control {
 public:
  explicit Control(int fd) : fd_(fd) {}
  void Send(const std::string& line) {
    std::string out = line + "\n";
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = write(fd_, out.data() + done, out.size() - done);
      if (n <= 0) Die("control channel closed");
      done += static_cast<size_t>(n);
    }
  }
  std::string Receive() {
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      char chunk[4096];
      ssize_t n = read(fd_, chunk, sizeof(chunk));
      if (n <= 0) Die("control channel closed");
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  std::string buffer_;
};

std::string Hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}
std::string Unhex(const std::string& hex) {
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(v(hex[i]) << 4 | v(hex[i + 1]));
  }
  return out;
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

// The ping-pong layout of each side's small region: data at 0, notify word
// at 64 (its own cache line).
constexpr uint64_t kPingData = 0;
constexpr uint64_t kPingFlag = 64;

// Waits until the 8-byte word at `word` holds `value`.
void PollFor(const uint64_t* word, uint64_t value) {
  std::atomic_ref<const uint64_t> flag(*word);
  for (int spins = 0; flag.load(std::memory_order_acquire) != value;) {
    if (++spins > FLAGS_spin_before_yield) sched_yield();
  }
}

ContextOptions Options(const std::string& name, TransportChoice t) {
  ContextOptions o;
  o.name = name;
  o.listen_host = "127.0.0.1";
  o.listen_port = 0;
  o.transport = t;
  o.peer_timeout_ms = 30000;
  o.cpu_wakeup_latency_us = FLAGS_cpu_wakeup_latency_us;
  // XFER_IB_DEV and the like pick the RDMA device (scripts/verbs_vm.sh).
  auto with_environment = ApplyEnvironment(std::move(o), environ);
  if (!with_environment.ok()) Die(with_environment.status().ToString());
  return std::move(*with_environment);
}

// One side of a ping-pong over `ep`: Send puts `v` into the other side's
// ping region (as the data word, or as the notify word after the data);
// Await polls this side's region for the other side's `v`. The request of
// a put that did not complete at once is waited for just before the next
// Send or after the answer came, so at most one is in flight.
struct PingPong {
  Endpoint& ep;
  const RemoteRegion& remote;  // the other side's ping region
  const uint64_t* mine;        // the word the other side writes here
  bool notify;
  Request in_flight;

  PingPong(Endpoint& e, const RemoteRegion& r, MemoryRegion& own, bool n)
      : ep(e),
        remote(r),
        mine(reinterpret_cast<const uint64_t*>(
            static_cast<uint8_t*>(own.data()) + (n ? kPingFlag : kPingData))),
        notify(n) {}
  void Send(uint64_t v) {
    Check(in_flight.Wait(), "ping-pong put");
    in_flight = notify ? ep.PostPutWithNotify(&v, 8, remote, kPingData, remote,
                                              kPingFlag, v)
                       : ep.PostPut(&v, 8, remote, kPingData);
  }
  void Await(uint64_t v) { PollFor(mine, v); }
  ~PingPong() { Check(in_flight.Wait(), "ping-pong put"); }
};

// The peer: owns the target region of the bandwidth tests and answers
// ping-pongs.
int RunPeer(Control& control, TransportChoice t, size_t region_size) {
  auto ctx = Check(Context::Create(Options("perf-peer", t)), "peer context");
  auto big = Check(ctx->Allocate(region_size, kRemoteAll), "peer region");
  auto ping = Check(ctx->Allocate(4096, kRemoteAll), "peer ping region");
  control.Send("ready " + ctx->address() + " " + Hex(big->descriptor()) + " " +
               Hex(ping->descriptor()));
  std::shared_ptr<Endpoint> ep;
  RemoteRegion origin_ping;
  for (;;) {
    std::vector<std::string> w = Words(control.Receive());
    if (w.empty()) continue;
    if (w[0] == "exit") return 0;
    if (w[0] == "connect" && w.size() == 3) {
      ep = Check(ctx->Connect(w[1]), "peer connect");
      origin_ping = Check(ep->Import(Unhex(w[2])), "peer import");
      control.Send("ok");
    } else if (w[0] == "pong" && w.size() == 4) {
      uint64_t first = std::stoull(w[2]), count = std::stoull(w[3]);
      PingPong pp(*ep, origin_ping, *ping, w[1] == "notify");
      control.Send("ok");
      for (uint64_t v = first; v < first + count; ++v) {
        pp.Await(v);
        pp.Send(v);
      }
    }
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Measurer {
  Endpoint& ep;
  RemoteRegion big;
  size_t region_size;
  std::vector<uint8_t>& buffer;  // local source / destination

  // One repetition of pipelined puts or gets of `size` bytes; GB/s.
  double Bandwidth(bool put, size_t size) {
    const size_t window = std::max<uint64_t>(1, FLAGS_window);
    // Like ucx_perftest, every operation reuses one local buffer and one
    // remote offset unless --rotate_buffers spreads them over the regions
    // (then large sizes measure DRAM, not the transport).
    const size_t remote_slots =
        FLAGS_rotate_buffers ? std::max<size_t>(1, region_size / size) : 1;
    const size_t local_slots =
        FLAGS_rotate_buffers ? std::max<size_t>(1, buffer.size() / size) : 1;
    std::vector<Request> requests(window);
    uint64_t ops = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      for (size_t q = 0; q < window; ++q, ++ops) {
        uint64_t roff = (ops % remote_slots) * size;
        uint8_t* local = buffer.data() + (ops % local_slots) * size;
        if (put) {
          requests[q] = ep.PostPut(local, size, big, roff);
        } else {
          requests[q] = ep.PostGet(local, size, big, roff);
        }
      }
      if (put) {
        Check(ep.Flush(), "flush");
        for (auto& r : requests) Check(r.Wait(), "put");
      } else {
        for (auto& r : requests) Check(r.Wait(), "get");
      }
      elapsed = Seconds(start, Clock::now());
    } while (elapsed < FLAGS_rep_seconds);
    return static_cast<double>(ops) * size / elapsed / 1e9;
  }
};

struct Figure {
  std::string transport, test;
  size_t size;
  double median, min, max;
  std::string unit;
};

void MeasureTransport(TransportChoice t, const std::string& label,
                      TestSet tests, std::vector<Figure>* figures) {
  const size_t region_size = std::max<size_t>(64 << 20, FLAGS_max_size);
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    Die("socketpair");
  }
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(fds[0]);
    Control control(fds[1]);
    std::_Exit(RunPeer(control, t, region_size));
  }
  close(fds[1]);
  Control peer(fds[0]);
  std::vector<std::string> ready = Words(peer.Receive());
  if (ready.size() != 4 || ready[0] != "ready") Die("peer did not start");

  {
    auto ctx = Check(Context::Create(Options("perf-origin", t)), "context");
    auto ping = Check(ctx->Allocate(4096, kRemoteAll), "ping region");
    std::shared_ptr<Endpoint> ep = Check(ctx->Connect(ready[1]), "connect");
    RemoteRegion big = Check(ep->Import(Unhex(ready[2])), "import");
    RemoteRegion peer_ping = Check(ep->Import(Unhex(ready[3])), "import");
    peer.Send("connect " + ctx->address() + " " + Hex(ping->descriptor()));
    if (peer.Receive() != "ok") Die("peer could not connect back");
    std::printf("# %s: transport %s\n", label.c_str(),
                std::string(TransportName(ep->transport())).c_str());

    std::vector<uint8_t> buffer(std::max<size_t>(FLAGS_max_size * 2, 32 << 20),
                                0x5a);
    // Registered, as RDMA benchmarks register theirs: verbs then reads and
    // writes it in place instead of through bounce slots (no effect on shm
    // and tcp, which need no registration).
    auto local = Check(ctx->Register(buffer.data(), buffer.size(), kLocalOnly),
                       "local buffer");
    Measurer m{*ep, big, region_size, buffer};
    for (bool put : {true, false}) {
      if (!Has(tests, put ? Test::kPutBw : Test::kGetBw)) continue;
      for (size_t size = FLAGS_min_size; size <= FLAGS_max_size;
           size *= std::max<uint64_t>(2, FLAGS_size_step)) {
        std::vector<double> reps;
        m.Bandwidth(put, size);  // warm-up
        for (int r = 0; r < FLAGS_reps; ++r)
          reps.push_back(m.Bandwidth(put, size));
        figures->push_back(
            {label, put ? "put_bw" : "get_bw", size, Median(reps),
             *std::min_element(reps.begin(), reps.end()),
             *std::max_element(reps.begin(), reps.end()), "GB/s"});
        std::fflush(stdout);
      }
    }

    // Latency: a median per repetition of `one` (timed per call in ticks,
    // microseconds = its seconds * `scale`), then the median of those; a
    // warm-up first.
    std::vector<double> samples(FLAGS_lat_iters);
    auto latency = [&](const char* test, double scale, auto&& before_rep,
                       auto&& one) {
      std::vector<double> reps;
      for (int r = -1; r < FLAGS_reps; ++r) {
        const int iters = r < 0 ? FLAGS_warmup : FLAGS_lat_iters;
        before_rep(iters);
        const auto wall_start = Clock::now();
        const uint64_t first = Ticks();
        uint64_t last = first;
        for (int i = 0; i < iters; ++i) {
          one();
          const uint64_t now = Ticks();
          if (r >= 0) samples[i] = static_cast<double>(now - last);
          last = now;
        }
        if (r < 0) continue;
        const double seconds_per_tick =
            Seconds(wall_start, Clock::now()) /
            static_cast<double>(std::max<uint64_t>(1, Ticks() - first));
        reps.push_back(Median(samples) * seconds_per_tick * scale);
      }
      figures->push_back({label, test, 8, Median(reps),
                          *std::min_element(reps.begin(), reps.end()),
                          *std::max_element(reps.begin(), reps.end()), "us"});
    };
    uint64_t next = 1;
    for (bool notify : {false, true}) {
      if (!Has(tests, notify ? Test::kPutNotifyLat : Test::kPutLat)) continue;
      PingPong pp(*ep, peer_ping, *ping, notify);
      auto start_peer = [&](int iters) {
        peer.Send(std::string("pong ") + (notify ? "notify " : "plain ") +
                  std::to_string(next) + " " + std::to_string(iters));
        if (peer.Receive() != "ok") Die("peer refused the ping-pong");
      };
      latency(notify ? "put_notify_lat" : "put_lat", 1e6 / 2, start_peer, [&] {
        pp.Send(next);
        pp.Await(next++);
      });
    }
    auto nothing = [](int) {};
    if (Has(tests, Test::kFetchAddLat)) {
      latency("fetch_add_lat", 1e6, nothing,
              [&] { Check(ep->FetchAdd64(big, 0, 1).status(), "fetch_add"); });
    }
    if (Has(tests, Test::kCompareSwapLat)) {
      // Every one swaps: the word goes expected -> expected + 1.
      uint64_t expected = Check(ep->CompareSwap64(big, 8, 0, 0), "swap");
      latency("compare_swap_lat", 1e6, nothing, [&] {
        uint64_t was = Check(ep->CompareSwap64(big, 8, expected, expected + 1),
                             "compare_swap");
        if (was != expected) Die("compare-swap found an unexpected value");
        ++expected;
      });
    }
    peer.Send("exit");
  }  // the origin's context goes before the next fork
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("peer failed");
}

std::string SizeName(size_t size) {
  if (size >= (1 << 20) && size % (1 << 20) == 0) {
    return std::to_string(size >> 20) + "MiB";
  }
  if (size >= 1024 && size % 1024 == 0)
    return std::to_string(size >> 10) + "KiB";
  return std::to_string(size) + "B";
}

int Main() {
  if (FLAGS_quick) {
    FLAGS_reps = std::min(FLAGS_reps, 3);
    FLAGS_rep_seconds = std::min(FLAGS_rep_seconds, 0.05);
    FLAGS_lat_iters = std::min(FLAGS_lat_iters, 5000);
    FLAGS_warmup = std::min(FLAGS_warmup, 500);
  }
  if (FLAGS_min_size == 0 || FLAGS_min_size > FLAGS_max_size) {
    Die("--min_size must be in 1 .. --max_size");
  }
  if (FLAGS_reps < 1 || FLAGS_lat_iters < 1) Die("--reps and --lat_iters >= 1");
  TestSet tests = 0;
  std::stringstream test_list(FLAGS_tests);
  for (std::string name; std::getline(test_list, name, ',');) {
    const TestName* found = nullptr;
    for (const TestName& t : kTests) {
      if (name == t.name) found = &t;
    }
    if (found == nullptr) Die("--tests: unknown figure '" + name + "'");
    tests |= static_cast<unsigned>(found->test);
  }
  std::vector<Figure> figures;
  std::stringstream list(FLAGS_transports);
  for (std::string name; std::getline(list, name, ',');) {
    auto choice = ps::xfer::TransportChoiceFromName(
        name, {TransportChoice::kShm, TransportChoice::kTcp,
               TransportChoice::kVerbs});
    if (!choice.ok()) Die("--transports: " + choice.status().message());
    MeasureTransport(*choice, name, tests, &figures);
  }

  std::printf("%-5s %-16s %9s %12s %12s %12s %5s\n", "tport", "test", "size",
              "median", "min", "max", "unit");
  for (const Figure& f : figures) {
    std::printf("%-5s %-16s %9s %12.4f %12.4f %12.4f %5s\n",
                f.transport.c_str(), f.test.c_str(), SizeName(f.size).c_str(),
                f.median, f.min, f.max, f.unit.c_str());
  }
  // Headline figures, one per line, for scripts/bench_core.sh.
  for (const Figure& f : figures) {
    const bool bw = f.unit == "GB/s";
    if (bw && f.size != (1 << 20)) continue;
    std::string name = f.transport + "_" + f.test + "_";
    if (f.test == "fetch_add_lat" || f.test == "compare_swap_lat")
      name = f.transport + "_" + f.test;
    else
      name += bw ? "1MiB" : "8B";
    std::printf("RESULT %s %.4f %s\n", name.c_str(), f.median, f.unit.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace ps::xfer

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "bandwidth and latency of the xfer core between two processes");
  if (ps::Status s = ps::cli::ParseFlags(&argc, &argv); !s.ok()) {
    std::fprintf(stderr, "xfer_perf: %s\n", s.message().c_str());
    return 2;
  }
  return ps::xfer::Main();
}
