#include "tests/core/xfer_test_peer.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/access.h"
#include "core/transport_name.h"

namespace ps::testing {

using xfer::Context;
using xfer::ContextOptions;
using xfer::MemoryRegion;
using xfer::TransportChoice;

ContextOptions TestOptions(const std::string& name, TransportChoice transport,
                           uint16_t port, int peer_timeout_ms) {
  ContextOptions options;
  options.name = name;
  options.listen_host = "127.0.0.1";
  options.listen_port = port;
  options.transport = transport;
  options.peer_timeout_ms = peer_timeout_ms;
  return options;
}

std::string TransportLabel(TransportChoice transport) {
  return std::string(xfer::TransportChoiceName(transport));
}

std::vector<TransportChoice> TestedTransports() {
  std::vector<TransportChoice> t = {TransportChoice::kShm,
                                    TransportChoice::kTcp};
  if (PS_HAVE_VERBS) t.push_back(TransportChoice::kVerbs);
  return t;
}

std::string TransportUnusable(TransportChoice transport) {
  if (transport != TransportChoice::kVerbs) return "";
  // A device shows up in sysfs; the same check the context makes first.
  std::error_code ec;
  if (!std::filesystem::is_directory("/sys/class/infiniband", ec) ||
      std::filesystem::is_empty("/sys/class/infiniband", ec)) {
    return "no RDMA device here: the verbs tests run in a soft-RoCE guest "
           "(scripts/verbs_vm.sh)";
  }
  return "";
}

xfer::TransportKind ExpectedKind(TransportChoice transport) {
  switch (transport) {
    case TransportChoice::kShm:
      return xfer::TransportKind::kShm;
    case TransportChoice::kVerbs:
      return xfer::TransportKind::kVerbs;
    default:
      return xfer::TransportKind::kTcp;
  }
}

uint64_t Fnv1a(const void* data, size_t length) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < length; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

void FillPattern(void* data, size_t length, uint64_t seed) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < length; ++i) p[i] = PatternByte(seed, i);
}

namespace {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

int RunTarget(LineChannel& channel, const std::string& name,
              TransportChoice transport, uint16_t port, bool staged) {
  // Application memory outlives the context that serves it (declared first,
  // destroyed last): a progress thread may still be sending from it.
  std::unique_ptr<void, AlignedFree> app_memory(
      std::aligned_alloc(4096, kTargetRegionSize));
  std::memset(app_memory.get(), 0, kTargetRegionSize);
  std::unique_ptr<void, AlignedFree> sync_memory(
      std::aligned_alloc(4096, 4096));
  std::memset(sync_memory.get(), 0, 4096);

  ContextOptions options = TestOptions(name, transport, port);
  options.verbs_stage_host_regions_for_testing = staged;
  auto created = Context::Create(options);
  PS_CHILD_CHECK(created.ok(), created.status().ToString());
  std::unique_ptr<Context> ctx = std::move(created).value();

  const int region_count =
      staged ? kStagedTargetRegionCount : kTargetRegionCount;
  std::vector<std::shared_ptr<MemoryRegion>> regions(region_count);
  {
    auto r0 = ctx->Allocate(kTargetRegionSize, xfer::kRemoteAll);
    auto r1 =
        ctx->Register(app_memory.get(), kTargetRegionSize, xfer::kRemoteAll);
    auto r2 = ctx->Allocate(kSmallRegionSize, xfer::kRemoteRead);
    auto r3 = ctx->Allocate(kSmallRegionSize, xfer::kRemoteAll);
    // Registered, not allocated: on shm the atomics on a registered region
    // are done by this process's progress thread (the one that also copies
    // into the registered region), which is what the sync has to order.
    auto r4 = ctx->Register(sync_memory.get(), 4096, xfer::kRemoteAtomic);
    PS_CHILD_CHECK(r0.ok(), r0.status().ToString());
    PS_CHILD_CHECK(r1.ok(), r1.status().ToString());
    PS_CHILD_CHECK(r2.ok(), r2.status().ToString());
    PS_CHILD_CHECK(r3.ok(), r3.status().ToString());
    PS_CHILD_CHECK(r4.ok(), r4.status().ToString());
    regions[0] = *r0;
    regions[1] = *r1;
    regions[2] = *r2;
    regions[3] = *r3;
    regions[4] = *r4;
  }
  if (staged) {
    const uint32_t rw = xfer::kRemoteRead | xfer::kRemoteWrite;
    auto r5 = ctx->Allocate(kTargetRegionSize, rw);
    auto r6 = ctx->Allocate(kSmallRegionSize, xfer::kRemoteWrite);
    auto r7 = ctx->Allocate(kSmallRegionSize, rw);
    PS_CHILD_CHECK(r5.ok(), r5.status().ToString());
    PS_CHILD_CHECK(r6.ok(), r6.status().ToString());
    PS_CHILD_CHECK(r7.ok(), r7.status().ToString());
    regions[kStagedRw] = *r5;
    regions[kStagedWriteOnly] = *r6;
    regions[kStagedDoomed] = *r7;
  }
  std::atomic_ref<uint64_t> sync_word(
      *static_cast<uint64_t*>(regions[kSync]->data()));
  // The read-only region holds a known pattern, so a denied write that
  // slipped through would show.
  FillPattern(regions[kReadOnly]->data(), kSmallRegionSize, 77);
  sync_word.fetch_add(1, std::memory_order_acq_rel);

  std::string ready = "ready " + ctx->address();
  for (const auto& region : regions) {
    ready += " " + HexEncode(region->descriptor());
  }
  PS_CHILD_CHECK(channel.Send(ready));

  for (;;) {
    // A long wait: tests drive the target at their own pace. A closed
    // channel means the parent is gone.
    std::optional<std::string> line = channel.Receive(120000);
    if (!line) return 2;
    std::vector<std::string> w = SplitWords(*line);
    if (w.empty()) continue;
    auto region_at = [&](const std::string& word) -> MemoryRegion* {
      int index = std::atoi(word.c_str());
      if (index < 0 || index >= region_count) return nullptr;
      return regions[index].get();
    };
    if (w[0] == "exit") return 0;
    // Acquire what the progress thread wrote before the origin's sync, and
    // (in reply) release this thread's accesses to the origin's next sync.
    sync_word.fetch_add(1, std::memory_order_acq_rel);
    auto reply = [&](const std::string& answer) {
      sync_word.fetch_add(1, std::memory_order_acq_rel);
      channel.Send(answer);
    };
    if (w[0] == "hash" && w.size() == 4) {
      MemoryRegion* r = region_at(w[1]);
      uint64_t off = std::strtoull(w[2].c_str(), nullptr, 10);
      uint64_t len = std::strtoull(w[3].c_str(), nullptr, 10);
      PS_CHILD_CHECK(r != nullptr && off + len <= r->size(), *line);
      uint64_t h = Fnv1a(static_cast<uint8_t*>(r->data()) + off, len);
      reply("hash " + std::to_string(h));
    } else if (w[0] == "load64" && w.size() == 3) {
      MemoryRegion* r = region_at(w[1]);
      uint64_t off = std::strtoull(w[2].c_str(), nullptr, 10);
      PS_CHILD_CHECK(r != nullptr && off + 8 <= r->size() && off % 8 == 0,
                     *line);
      auto* word =
          reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(r->data()) + off);
      uint64_t v =
          std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire);
      reply("value " + std::to_string(v));
    } else if (w[0] == "fill" && w.size() == 5) {
      MemoryRegion* r = region_at(w[1]);
      uint64_t off = std::strtoull(w[2].c_str(), nullptr, 10);
      uint64_t len = std::strtoull(w[3].c_str(), nullptr, 10);
      uint64_t seed = std::strtoull(w[4].c_str(), nullptr, 10);
      PS_CHILD_CHECK(r != nullptr && off + len <= r->size(), *line);
      FillPattern(static_cast<uint8_t*>(r->data()) + off, len, seed);
      reply("ok");
    } else if (w[0] == "dereg" && w.size() == 2) {
      MemoryRegion* r = region_at(w[1]);
      PS_CHILD_CHECK(r != nullptr, *line);
      Status s = ctx->Deregister(*r);
      reply(s.ok() ? "ok" : "error " + s.ToString());
    } else {
      PS_CHILD_CHECK(false, "unknown command: " + *line);
    }
  }
}

std::optional<TargetInfo> AwaitReady(LineChannel& channel, int timeout_ms) {
  std::optional<std::string> line = channel.Receive(timeout_ms);
  if (!line) return std::nullopt;
  std::vector<std::string> w = SplitWords(*line);
  if (w.size() < 2 || w[0] != "ready") return std::nullopt;
  TargetInfo info;
  info.address = w[1];
  for (size_t i = 2; i < w.size(); ++i) {
    std::optional<std::string> bytes = HexDecode(w[i]);
    if (!bytes) return std::nullopt;
    info.descriptors.push_back(std::move(*bytes));
  }
  return info;
}

ChildProcess StartTarget(const std::string& name, TransportChoice transport,
                         uint16_t port, bool staged) {
  return ChildProcess::Start(
      name, [name, transport, port, staged](LineChannel& ch) {
        return RunTarget(ch, name, transport, port, staged);
      });
}

Status TargetHandle::Connect(Context& ctx) {
  auto connected = ctx.Connect(info.address);
  if (!connected.ok()) return connected.status();
  ep = *connected;
  regions.clear();
  for (const std::string& d : info.descriptors) {
    auto r = ep->Import(d);
    if (!r.ok()) return r.status();
    regions.push_back(*r);
  }
  // Acquire what the target wrote into its regions while it set them up.
  return SyncTarget(*ep, regions[kSync]);
}

std::optional<uint64_t> TargetHandle::Hash(int region, uint64_t offset,
                                           uint64_t length) {
  if (!SyncTarget(*ep, regions[kSync]).ok()) return std::nullopt;
  std::optional<uint64_t> h =
      RemoteHash(process.channel(), region, offset, length);
  if (!SyncTarget(*ep, regions[kSync]).ok()) return std::nullopt;
  return h;
}

std::optional<uint64_t> TargetHandle::Load64(int region, uint64_t offset) {
  if (!SyncTarget(*ep, regions[kSync]).ok()) return std::nullopt;
  std::optional<uint64_t> v = RemoteLoad64(process.channel(), region, offset);
  if (!SyncTarget(*ep, regions[kSync]).ok()) return std::nullopt;
  return v;
}

std::optional<int> TargetHandle::Exit() {
  if (!process.running()) return std::nullopt;
  process.channel().Send("exit");
  return process.Wait(20000);
}

Status SyncTarget(xfer::Endpoint& endpoint, const xfer::RemoteRegion& sync) {
  return endpoint.FetchAdd64(sync, 0, 1).status();
}

static std::optional<uint64_t> AskNumber(LineChannel& channel,
                                         const std::string& question,
                                         const std::string& answer_word) {
  if (!channel.Send(question)) return std::nullopt;
  std::optional<std::string> line = channel.Receive(20000);
  if (!line) return std::nullopt;
  std::vector<std::string> w = SplitWords(*line);
  if (w.size() != 2 || w[0] != answer_word) return std::nullopt;
  return std::strtoull(w[1].c_str(), nullptr, 10);
}

std::optional<uint64_t> RemoteHash(LineChannel& channel, int region,
                                   uint64_t offset, uint64_t length) {
  return AskNumber(channel,
                   "hash " + std::to_string(region) + " " +
                       std::to_string(offset) + " " + std::to_string(length),
                   "hash");
}

std::optional<uint64_t> RemoteLoad64(LineChannel& channel, int region,
                                     uint64_t offset) {
  return AskNumber(
      channel,
      "load64 " + std::to_string(region) + " " + std::to_string(offset),
      "value");
}

bool Command(LineChannel& channel, const std::string& command) {
  if (!channel.Send(command)) return false;
  std::optional<std::string> line = channel.Receive(20000);
  return line && *line == "ok";
}

}  // namespace ps::testing
