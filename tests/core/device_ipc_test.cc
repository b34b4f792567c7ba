// Same-host device regions over CUDA IPC (core/shm/shm_transport.h), across
// processes: a forked owner allocates device memory and exports it; this
// process opens the export and puts and gets with device copies, without
// the owner's CPU. Checked: bytes land exactly (whole and scattered), the
// notify word (host memory) follows the device data, the connection used
// the IPC path (not the staged fallback), and a deregistered region is
// refused by its liveness word. Its own binary: the owner is forked before
// this process touches CUDA (a CUDA process cannot fork a CUDA child).
// Skips, saying why, where the owner finds no usable device.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"
#include "core/shm/remote_mapping.h"
#include "tests/core/process_harness.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Context;
using xfer::TransportChoice;

constexpr size_t kDataBytes = (3 << 20) + 123;

// The owner: "ready ADDRESS HEXDATA HEXFLAG" or "skip WHY", then "dereg"
// -> "ok", "exit" -> exits 0.
int RunOwner(LineChannel& channel) {
  auto ctx = Context::Create(TestOptions("owner", TransportChoice::kShm));
  PS_CHILD_CHECK(ctx.ok(), ctx.status().ToString());
  auto data = (*ctx)->AllocateDevice(kDataBytes,
                                     xfer::kRemoteRead | xfer::kRemoteWrite);
  if (!data.ok()) {
    channel.Send("skip " + data.status().ToString());
    return channel.Receive(30000) == "exit" ? 0 : 1;
  }
  auto flag = (*ctx)->Allocate(64, xfer::kRemoteRead | xfer::kRemoteWrite);
  PS_CHILD_CHECK(flag.ok(), flag.status().ToString());
  channel.Send("ready " + (*ctx)->address() + " " +
               HexEncode((*data)->descriptor()) + " " +
               HexEncode((*flag)->descriptor()));
  for (;;) {
    std::optional<std::string> line = channel.Receive(60000);
    if (!line.has_value() || *line == "exit") return line.has_value() ? 0 : 1;
    if (*line == "dereg") {
      Status s = (*ctx)->Deregister(**data);
      channel.Send(s.ok() ? "ok" : "error " + s.ToString());
    }
  }
}

TEST(DeviceIpcTest, PutsGetsAndNotifyGoOverCudaIpc) {
  PS_SKIP_IF_UNUSABLE(TransportChoice::kShm);
  ChildProcess owner = ChildProcess::Start("owner", RunOwner);
  std::optional<std::string> line = owner.channel().Receive(30000);
  ASSERT_TRUE(line.has_value());
  if (line->rfind("skip ", 0) == 0) {
    owner.channel().Send("exit");
    GTEST_SKIP() << "no CUDA device in the owner: " << line->substr(5);
  }
  const std::vector<std::string> words = SplitWords(*line);
  ASSERT_EQ(words.size(), 4u) << *line;
  auto data_desc = HexDecode(words[2]), flag_desc = HexDecode(words[3]);
  ASSERT_TRUE(data_desc.has_value() && flag_desc.has_value());

  auto ctx = Context::Create(TestOptions("origin", TransportChoice::kShm));
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  auto ep = (*ctx)->Connect(words[1]);
  ASSERT_TRUE(ep.ok()) << ep.status();
  auto data = (*ep)->Import(*data_desc);
  auto flag = (*ep)->Import(*flag_desc);
  ASSERT_TRUE(data.ok() && flag.ok());

  std::vector<uint8_t> bytes(kDataBytes), back(kDataBytes, 0);
  FillPattern(bytes.data(), bytes.size(), 11);
  ASSERT_TRUE((*ep)->Put(bytes.data(), bytes.size(), *data, 0).ok());
  ASSERT_TRUE((*ep)->Get(back.data(), back.size(), *data, 0).ok());
  EXPECT_EQ(back, bytes);
  const xfer::internal::RemoteMapping* m = xfer::internal::MappingOf(*data);
  EXPECT_TRUE(m->ready.load() && !m->device_refused.load())
      << "the put was staged, not copied over CUDA IPC (see the log)";

  std::vector<xfer::Segment> out, in;
  std::vector<uint8_t> pieces(300 * 1000), read(300 * 1000, 0);
  FillPattern(pieces.data(), pieces.size(), 12);
  for (size_t i = 0; i < 300; ++i) {
    out.push_back({pieces.data() + i * 1000, 7 + i * 1024, 1000});
    in.push_back({read.data() + i * 1000, 7 + i * 1024, 1000});
  }
  ASSERT_TRUE((*ep)->WriteV(out, *data).ok());
  ASSERT_TRUE((*ep)->ReadV(in, *data).ok());
  EXPECT_EQ(read, pieces);

  std::vector<uint8_t> round_bytes(1 << 20);
  for (uint64_t round = 1; round <= 5; ++round) {
    FillPattern(round_bytes.data(), round_bytes.size(), 20 + round);
    ASSERT_TRUE((*ep)
                    ->PutWithNotify(round_bytes.data(), round_bytes.size(),
                                    *data, 0, *flag, 0, round)
                    .ok());
    uint64_t word = 0;
    ASSERT_TRUE((*ep)->Get(&word, 8, *flag, 0).ok());
    EXPECT_EQ(word, round);
    std::vector<uint8_t> got(round_bytes.size());
    ASSERT_TRUE((*ep)->Get(got.data(), got.size(), *data, 0).ok());
    ASSERT_EQ(got, round_bytes) << "round " << round;
  }
  // Atomics and a notify word in device memory are refused.
  EXPECT_FALSE((*ep)->FetchAdd64(*data, 0, 1).ok());
  const uint64_t one = 1;
  EXPECT_TRUE((*ep)
                  ->PutWithNotify(&one, 8, *data, 0, *data, 64, 1)
                  .Is(StatusCode::kNotSupported));

  // Revocation: the liveness word refuses the deregistered region at once.
  ASSERT_TRUE(owner.channel().Send("dereg"));
  ASSERT_EQ(owner.channel().Receive(10000), std::optional<std::string>("ok"));
  Status s = (*ep)->Put(bytes.data(), 64, *data, 0);
  EXPECT_TRUE(s.Is(StatusCode::kNotRegistered)) << s;

  ep->reset();  // closes the handles, then the connection
  ASSERT_TRUE(owner.channel().Send("exit"));
  EXPECT_EQ(owner.Wait(10000), std::optional<int>(0));
}

}  // namespace
}  // namespace ps::testing
