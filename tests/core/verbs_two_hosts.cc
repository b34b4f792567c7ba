// verbs_two_hosts: the put/get/atomic subset of the xfer tests across two
// machines (two soft-RoCE guests joined by a virtual link; see
// scripts/verbs_vm.sh --two-guests). Not a ctest test: each half runs on its
// own host, and they meet through files in a shared directory.
//
//   verbs_two_hosts target HOST:PORT DIR   serves regions until DIR/done
//   verbs_two_hosts origin DIR             checks every operation, writes
//                                          DIR/done; exit status 0 = pass
//
// The peers choose their transport themselves (auto): different hosts with
// RDMA devices must pick verbs.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"

namespace ps::xfer {
namespace {

int failures = 0;

#define CHECK_THAT(cond, what)                                                \
  do {                                                                        \
    if (!(cond)) {                                                            \
      ++failures;                                                             \
      std::fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                \
    }                                                                         \
  } while (0)

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

bool WaitForFile(const std::string& path, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (access(path.c_str(), F_OK) == 0) return true;
    usleep(100000);
  }
  return false;
}

constexpr size_t kRegionBytes = 1 << 20;

int RunTarget(const std::string& address, const std::string& dir) {
  ContextOptions o;
  o.name = "target";
  o.listen_host = address.substr(0, address.rfind(':'));
  o.listen_port =
      static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  auto ctx = Context::Create(o);
  if (!ctx.ok()) {
    std::fprintf(stderr, "target: %s\n", ctx.status().ToString().c_str());
    return 1;
  }
  auto rw = (*ctx)->Allocate(kRegionBytes, kRemoteAll);
  auto ro = (*ctx)->Allocate(4096, kRemoteRead);
  if (!rw.ok() || !ro.ok()) return 1;
  std::memset((*ro)->data(), 0x77, 4096);
  {
    std::ofstream out(dir + "/target.tmp");
    out << (*ctx)->address() << " " << Hex((*rw)->descriptor()) << " "
        << Hex((*ro)->descriptor()) << "\n";
  }
  rename((dir + "/target.tmp").c_str(), (dir + "/target.ready").c_str());
  std::fprintf(stderr, "target: ready at %s\n", (*ctx)->address().c_str());
  if (!WaitForFile(dir + "/done", 300)) return 1;
  return 0;
}

int RunOrigin(const std::string& dir) {
  if (!WaitForFile(dir + "/target.ready", 150)) {
    std::fprintf(stderr, "origin: no target\n");
    return 1;
  }
  std::ifstream in(dir + "/target.ready");
  std::string address, rw_hex, ro_hex;
  in >> address >> rw_hex >> ro_hex;
  ContextOptions o;
  o.name = "origin";
  o.listen_host = "0.0.0.0";
  auto ctx = Context::Create(o);
  CHECK_THAT(ctx.ok(), ctx.status().ToString());
  if (!ctx.ok()) return 1;
  // The virtual link may still be coming up (ARP): retry for a while.
  auto ep = (*ctx)->Connect(address);
  for (int i = 0; i < 30 && !ep.ok(); ++i) {
    sleep(2);
    ep = (*ctx)->Connect(address);
  }
  CHECK_THAT(ep.ok(), ep.status().ToString());
  if (!ep.ok()) return 1;
  Endpoint& e = **ep;
  CHECK_THAT(e.transport() == TransportKind::kVerbs,
             "transport " + std::string(TransportName(e.transport())));
  auto rw = e.Import(Unhex(rw_hex));
  auto ro = e.Import(Unhex(ro_hex));
  CHECK_THAT(rw.ok() && ro.ok(), "import");
  if (!rw.ok() || !ro.ok()) return 1;

  // Put / Get of several sizes, through bounce slots and inline.
  for (size_t len : {size_t{8}, size_t{100}, size_t{4096}, size_t{300000}}) {
    std::vector<uint8_t> data(len), back(len, 0);
    for (size_t i = 0; i < len; ++i)
      data[i] = static_cast<uint8_t>(i * 7 + len);
    const uint64_t off = 4096 + len % 1000;
    Status s = e.Put(data.data(), len, *rw, off);
    CHECK_THAT(s.ok(), s.ToString());
    s = e.Get(back.data(), len, *rw, off);
    CHECK_THAT(s.ok() && back == data, "get " + std::to_string(len));
  }
  // Scatter-gather.
  std::vector<uint64_t> words(64), got(64, 0);
  std::vector<Segment> out, back;
  for (size_t i = 0; i < words.size(); ++i) {
    words[i] = i * 1000 + 3;
    out.push_back({&words[i], 512 * 1024 + i * 64, 8});
    back.push_back({&got[i], 512 * 1024 + i * 64, 8});
  }
  Status s = e.WriteV(out, *rw);
  CHECK_THAT(s.ok(), s.ToString());
  s = e.ReadV(back, *rw);
  CHECK_THAT(s.ok() && got == words, "readv");
  // Atomics.
  for (int i = 0; i < 100; ++i) {
    auto prev = e.FetchAdd64(*rw, 0, 1);
    CHECK_THAT(prev.ok() && *prev == static_cast<uint64_t>(i),
               prev.ok() ? std::to_string(*prev) : prev.status().ToString());
  }
  auto cas = e.CompareSwap64(*rw, 0, 100, 555);
  CHECK_THAT(cas.ok() && *cas == 100, "cas");
  cas = e.CompareSwap64(*rw, 0, 100, 777);
  CHECK_THAT(cas.ok() && *cas == 555, "failed cas");
  // PutWithNotify, read back.
  uint64_t payload[4] = {1, 2, 3, 4}, flag = 0;
  s = e.PutWithNotify(payload, sizeof(payload), *rw, 8192, *rw, 8, 99);
  CHECK_THAT(s.ok(), s.ToString());
  auto flag_now = e.Get(&flag, 8, *rw, 8);
  CHECK_THAT(flag_now.ok() && flag == 99, "notify word");
  // The read-only region reads, and refuses writes at the target's NIC.
  uint8_t b[64];
  s = e.Get(b, 64, *ro, 0);
  CHECK_THAT(s.ok() && b[0] == 0x77 && b[63] == 0x77, s.ToString());
  s = e.Put(b, 64, ro->WithAccessForTesting(kRemoteAll), 0);
  CHECK_THAT(s.Is(StatusCode::kAccessDenied), s.ToString());
  // A wrong key and an out-of-bounds access are statuses; then all works.
  s = e.Put(b, 64, rw->WithKeyForTesting(rw->key() ^ 0x5a5a5a5a), 0);
  CHECK_THAT(s.Is(StatusCode::kInvalidKey), s.ToString());
  s = e.Get(b, 64, rw->WithSizeForTesting(kRegionBytes * 2), kRegionBytes);
  CHECK_THAT(s.Is(StatusCode::kOutOfRange), s.ToString());
  auto after = e.FetchAdd64(*rw, 0, 1);
  CHECK_THAT(after.ok() && *after == 555, "after errors");
  CHECK_THAT(!e.lost(), "lost");
  // Flush reports the first error since the last Flush (the denied put);
  // after it, a clean round.
  s = e.Flush();
  CHECK_THAT(s.Is(StatusCode::kAccessDenied), s.ToString());
  s = e.Put(payload, 8, *rw, 16384);
  CHECK_THAT(s.ok(), s.ToString());
  s = e.Flush();
  CHECK_THAT(s.ok(), s.ToString());
  std::ofstream(dir + "/done") << failures << "\n";
  std::fprintf(stderr, "origin: %d failures over %s\n", failures,
               std::string(TransportName(e.transport())).c_str());
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ps::xfer

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "target") == 0) {
    return ps::xfer::RunTarget(argv[2], argv[3]);
  }
  if (argc == 3 && std::strcmp(argv[1], "origin") == 0) {
    return ps::xfer::RunOrigin(argv[2]);
  }
  std::fprintf(stderr,
               "usage: verbs_two_hosts target HOST:PORT DIR | origin DIR\n");
  return 2;
}
