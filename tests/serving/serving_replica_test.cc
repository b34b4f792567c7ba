// ps_serve processes and ServingClient: lookups over shm and tcp return
// rows byte-identical to a restore of the checkpoint each reply names; the
// replica follows a new checkpoint; a client fails over when its replica is
// killed; a replica killed with SIGKILL and restarted serves the newest
// complete checkpoint (not an interrupted one); a damaged checkpoint is
// skipped with its reason logged while the one before is served; the
// cluster secret guards lookups; forged packets and bad lookups are refused
// with the reason while the replica goes on serving; bad flags exit 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/access.h"
#include "launch/process.h"
#include "launch/server_ready.h"
#include "protocol/lookup_packet.h"
#include "protocol/serving_lookup.h"
#include "serving/serving_client.h"
#include "tests/checkpoint/checkpoint_fixture.h"

namespace ps::serving {
namespace {

using checkpoint::CheckpointDirName;
using checkpoint::JoinPath;
using checkpoint::testing::kDense;
using checkpoint::testing::kExact;
using checkpoint::testing::kHashed;
using checkpoint::testing::Model;
using checkpoint::testing::TempDir;
using checkpoint::testing::WriteCheckpoint;

// A ps_serve process on `root`, ready once it wrote its port file.
class Replica {
 public:
  Replica(const std::string& root, const std::string& dir,
          std::vector<std::string> flags = {}) {
    static int n = 0;
    const std::string tag = "replica-" + std::to_string(n++);
    port_file_ = JoinPath(dir, tag + ".port");
    launch::ProcessSpec spec;
    spec.argv = {PS_SERVE_BIN, "--checkpoint_dir=" + root,
                 "--port_file=" + port_file_, "--poll_ms=20"};
    spec.argv.insert(spec.argv.end(), flags.begin(), flags.end());
    spec.log_path = log_path_ = JoinPath(dir, tag + ".log");
    spec.name = tag;
    auto p = launch::Process::Spawn(spec);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return;
    process_ = std::move(*p);
  }
  // The control address, once serving (a failure names the log's end).
  std::string Await() {
    auto a = launch::AwaitAddress(*process_, port_file_, 30000, 5000);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : "";
  }
  launch::Process& process() { return *process_; }
  const std::string& log_path() const { return log_path_; }

  // A failed test shows the end of the replica's log.
  ~Replica() {
    if (!::testing::Test::HasFailure()) return;
    std::ifstream in(log_path_);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    const size_t from = lines.size() > 40 ? lines.size() - 40 : 0;
    std::string tail;
    for (size_t i = from; i < lines.size(); ++i) tail += lines[i] + "\n";
    std::printf("--- %s:\n%s", log_path_.c_str(), tail.c_str());
  }

 private:
  std::string log_path_;
  std::string port_file_;
  std::unique_ptr<launch::Process> process_;
};

bool SameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Looks up every DENSE row, HASHED ids and every EXACT key (plus one
// without a row) and checks each reply against a restore of the checkpoint
// it names. Returns the step the replies named (0 on a failure).
uint64_t ExpectLookupsMatch(ServingClient& client, const std::string& root,
                            const Model& model) {
  auto restored = model.MakeTarget(0, 1);
  uint64_t named = 0;
  for (const char* table : {"emb", "mlp", "ids"}) {
    SCOPED_TRACE(table);
    const proto::TableSpec* spec = client.table(table);
    if (spec == nullptr) {
      ADD_FAILURE() << "no table " << table;
      return 0;
    }
    std::vector<uint64_t> keys;
    if (spec->kind() == proto::EXACT) {
      for (uint32_t i = 0; i < model.exact_keys; ++i) {
        keys.push_back(model.ExactKey(i));
      }
      keys.push_back(99);  // no row
    } else if (spec->kind() == proto::DENSE) {
      for (uint64_t r = 0; r < spec->capacity(); ++r) keys.push_back(r);
    } else {
      for (uint64_t i = 0; i < 4000; ++i) {
        keys.push_back(protocol::Mix64(i * 13 + 1));
      }
    }
    std::vector<float> out(keys.size() * spec->dim());
    auto r = client.Lookup(table, keys, out);
    if (!r.ok()) {
      ADD_FAILURE() << r.status();
      return 0;
    }
    if (named != 0 && r->step != named) {
      // A switch between two tables' lookups: check against each.
      return ExpectLookupsMatch(client, root, model);
    }
    named = r->step;
    if (!checkpoint::RestoreShard(JoinPath(root, CheckpointDirName(named)),
                                  &restored.target)
             .ok()) {
      ADD_FAILURE() << "cannot restore " << named;
      return 0;
    }
    const auto& t = restored.target.tables[spec->id() - 1];
    const uint32_t dim = spec->dim();
    const auto map = protocol::ShardMap::ForTable(*spec, 1);
    for (size_t i = 0; i < keys.size(); ++i) {
      const float* want = nullptr;
      if (spec->kind() == proto::EXACT) {
        auto it =
            std::lower_bound(t.exact.ids.begin(), t.exact.ids.end(), keys[i]);
        if (it != t.exact.ids.end() && *it == keys[i]) {
          want = t.exact.values.data() + (it - t.exact.ids.begin()) * dim;
        }
      } else {
        want = t.values + map.GlobalRow(keys[i]) * dim;
      }
      const std::vector<float> zeros(dim, 0.0f);
      if (want == nullptr) want = zeros.data();
      if (!SameBits(out.data() + i * dim, want, dim)) {
        ADD_FAILURE() << "key " << keys[i] << " differs from checkpoint "
                      << named;
        return 0;
      }
    }
    if (spec->kind() == proto::EXACT) {
      EXPECT_EQ(r->missing, keys.size() - t.exact.ids.size());
    }
  }
  return named;
}

// Lookups until one names `step` (the replica follows within its poll).
void AwaitServed(ServingClient& client, uint64_t step) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::vector<uint64_t> key = {1};
  std::vector<float> out(client.table("mlp")->dim());
  for (;;) {
    auto r = client.Lookup("mlp", key, out);
    ASSERT_TRUE(r.ok()) << r.status();
    if (r->step == step) return;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "still serving " << r->step << ", not " << step;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::unique_ptr<ServingClient> ConnectTo(std::vector<std::string> replicas,
                                         xfer::TransportChoice transport) {
  ServingClient::Options o;
  o.replicas = std::move(replicas);
  o.xfer.transport = transport;
  o.timeout_ms = 5000;
  auto c = ServingClient::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

class ServingReplica : public ::testing::TestWithParam<xfer::TransportChoice> {
};

TEST_P(ServingReplica, LookupsMatchTheCheckpointTheyNameAndFollowIt) {
  TempDir dir;
  const std::string root = JoinPath(dir.path(), "ckpt");
  Model model;
  ASSERT_TRUE(WriteCheckpoint(root, model, 1, 2).ok());
  const std::string transport =
      GetParam() == xfer::TransportChoice::kShm ? "shm" : "tcp";
  Replica replica(root, dir.path(), {"--transport=" + transport});
  auto client = ConnectTo({replica.Await()}, GetParam());
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(ExpectLookupsMatch(*client, root, model), 1u);

  auto is_changed = [](uint32_t, uint64_t id) {
    return protocol::Mix64(id + 3) % 50 == 0;
  };
  model.version = [is_changed](uint32_t t, uint64_t id) {
    return is_changed(t, id) ? 1u : 0u;
  };
  std::function<bool(uint32_t, uint64_t)> changed = is_changed;
  ASSERT_TRUE(
      WriteCheckpoint(root, model, 2, 2, CheckpointDirName(1), &changed).ok());
  AwaitServed(*client, 2);
  EXPECT_EQ(ExpectLookupsMatch(*client, root, model), 2u);

  // Refusals come back as they are, and the client goes on.
  std::vector<float> out(model.hashed_dim);
  EXPECT_EQ(
      client->Lookup("nope", std::vector<uint64_t>{1}, out).status().code(),
      StatusCode::kInvalidArgument);
  std::vector<float> dense(model.dense_dim);
  auto past =
      client->Lookup("mlp", std::vector<uint64_t>{model.dense_capacity}, dense);
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("past the table"), std::string::npos)
      << past.status();
  EXPECT_EQ(ExpectLookupsMatch(*client, root, model), 2u);
}

INSTANTIATE_TEST_SUITE_P(Transports, ServingReplica,
                         ::testing::Values(xfer::TransportChoice::kShm,
                                           xfer::TransportChoice::kTcp));

TEST(ServingReplicas, ClientFailsOverWhenItsReplicaIsKilled) {
  TempDir dir;
  const std::string root = JoinPath(dir.path(), "ckpt");
  Model model;
  ASSERT_TRUE(WriteCheckpoint(root, model, 1, 2).ok());
  Replica a(root, dir.path()), b(root, dir.path());
  const std::string address_a = a.Await(), address_b = b.Await();
  auto client = ConnectTo({address_a, address_b}, xfer::TransportChoice::kTcp);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->replica(), address_a);
  EXPECT_EQ(ExpectLookupsMatch(*client, root, model), 1u);
  a.process().Signal(SIGKILL);
  a.process().WaitExit(10000);
  EXPECT_EQ(ExpectLookupsMatch(*client, root, model), 1u);
  EXPECT_EQ(client->replica(), address_b);
}

TEST(ServingReplicas, RestartAfterKillServesTheNewestCompleteCheckpoint) {
  TempDir dir;
  const std::string root = JoinPath(dir.path(), "ckpt");
  Model model;
  ASSERT_TRUE(WriteCheckpoint(root, model, 1, 2).ok());
  {
    Replica replica(root, dir.path());
    ASSERT_NE(replica.Await(), "");
    replica.process().Signal(SIGKILL);
    replica.process().WaitExit(10000);
  }
  model.version = [](uint32_t, uint64_t) { return 4u; };
  ASSERT_TRUE(WriteCheckpoint(root, model, 2, 2).ok());
  // Step 3: its shards written, never committed (no MANIFEST).
  ASSERT_TRUE(WriteCheckpoint(root, model, 3, 2).ok());
  std::filesystem::remove(JoinPath(JoinPath(root, CheckpointDirName(3)),
                                   checkpoint::kManifestName));
  Replica replica(root, dir.path());
  auto client = ConnectTo({replica.Await()}, xfer::TransportChoice::kAuto);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(ExpectLookupsMatch(*client, root, model), 2u);
}

// A damaged checkpoint appears (written elsewhere, an SST file cut short,
// then renamed in whole): the replica logs why it skips it and keeps
// serving the one before; the next good one is served.
TEST(ServingReplicas, DamagedCheckpointIsSkippedWithItsReason) {
  TempDir dir;
  const std::string root = JoinPath(dir.path(), "ckpt");
  Model model;
  ASSERT_TRUE(WriteCheckpoint(root, model, 1, 2).ok());
  Replica replica(root, dir.path());
  auto client = ConnectTo({replica.Await()}, xfer::TransportChoice::kAuto);
  ASSERT_NE(client, nullptr);

  Model next;
  next.version = [](uint32_t, uint64_t) { return 2u; };
  const std::string staging = JoinPath(dir.path(), "staging");
  ASSERT_TRUE(WriteCheckpoint(staging, next, 2, 2).ok());
  const std::string damaged = JoinPath(staging, CheckpointDirName(2));
  checkpoint::testing::CutShardShort(damaged, 1);
  std::filesystem::rename(damaged, JoinPath(root, CheckpointDirName(2)));
  // Its reason in the log, and the rows of checkpoint 1 meanwhile.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    std::ifstream log(replica.log_path());
    std::stringstream text;
    text << log.rdbuf();
    if (text.str().find("skipped " + root + "/" + CheckpointDirName(2)) !=
        std::string::npos) {
      EXPECT_NE(text.str().find("still serving " + CheckpointDirName(1)),
                std::string::npos);
      break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << text.str();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ExpectLookupsMatch(*client, root, model), 1u);
  ASSERT_TRUE(WriteCheckpoint(root, next, 3, 2).ok());
  AwaitServed(*client, 3);
  EXPECT_EQ(ExpectLookupsMatch(*client, root, next), 3u);
}

TEST(ServingReplicas, SecretGuardsLookups) {
  TempDir dir;
  const std::string root = JoinPath(dir.path(), "ckpt");
  Model model;
  ASSERT_TRUE(WriteCheckpoint(root, model, 1, 1).ok());
  const std::string secret_file = JoinPath(dir.path(), "cluster.key");
  std::ofstream(secret_file) << "a secret of more than sixteen bytes";
  chmod(secret_file.c_str(), 0600);
  Replica replica(root, dir.path(), {"--cluster_secret_file=" + secret_file});
  const std::string address = replica.Await();

  ServingClient::Options o;
  o.replicas = {address};
  o.timeout_ms = 5000;
  auto refused = ServingClient::Connect(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("secret"), std::string::npos)
      << refused.status();

  auto secret = xfer::ClusterSecret::FromFile(secret_file);
  ASSERT_TRUE(secret.ok()) << secret.status();
  o.xfer.secret = *secret;
  auto client = ServingClient::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(ExpectLookupsMatch(**client, root, model), 1u);
}

// A client of its own making: attaches as ServingClient does, then writes
// what it likes into the request region.
TEST(ServingReplicas, ForgedPacketsAreRefusedAndServingGoesOn) {
  TempDir dir;
  const std::string root = JoinPath(dir.path(), "ckpt");
  Model model;
  ASSERT_TRUE(WriteCheckpoint(root, model, 1, 1).ok());
  Replica replica(root, dir.path());
  const std::string address = replica.Await();

  auto ctx = xfer::Context::Create({}).value();
  auto control = protocol::ControlClient::Connect(address, {}).value();
  proto::ControlRequest hello;
  auto* h = hello.mutable_serve_hello();
  auto reply_region = ctx->Allocate(protocol::ServingReplyRegionBytes(65536, 8),
                                    xfer::kRemoteWrite)
                          .value();
  h->set_client_xfer_address(ctx->address());
  h->set_reply_region(reply_region->descriptor());
  auto info = control.Call(hello);
  ASSERT_TRUE(info.ok()) << info.status();
  auto ep = ctx->Connect(info->serve_info().xfer_address()).value();
  auto request = ep->Import(info->serve_info().request_region()).value();

  auto send = [&](std::vector<uint8_t> packet, uint64_t number) {
    EXPECT_TRUE(ep->PutWithNotify(packet.data(), packet.size(), request,
                                  protocol::kServingPacketOffset, request,
                                  protocol::kServingDoorbellOffset, number)
                    .ok());
    const char* region = static_cast<const char*>(reply_region->data());
    std::atomic_ref<const uint64_t> answered(
        *reinterpret_cast<const uint64_t*>(region));
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (answered.load() != number &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(answered.load(), number);
    return protocol::DecodeServingReply(
        std::span<const char>(region, protocol::kServingReplyHeaderBytes));
  };
  auto packet = [&](uint32_t table, uint64_t number) {
    std::vector<uint8_t> bytes;
    std::vector<protocol::EncodedPacket> packets;
    const std::vector<uint64_t> keys = {1, 2, 3};
    EXPECT_TRUE(protocol::EncodeLookupPackets(
                    {.table_id = table, .shard_id = 0, .sender_id = 0}, keys,
                    number, protocol::kServingReplyHeaderBytes, 32, 4096, 0,
                    &bytes, &packets)
                    .ok());
    return bytes;
  };

  std::vector<uint8_t> flipped = packet(kDense, 1);
  flipped.back() ^= 1;  // a key's byte: the checksum no longer holds
  EXPECT_EQ(send(flipped, 1).status.code(), StatusCode::kCorruption);
  EXPECT_EQ(send(packet(77, 2), 2).status.code(), StatusCode::kNotFound);
  const auto ok = send(packet(kDense, 3), 3);
  EXPECT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_EQ(ok.step, 1u);

  auto client = ConnectTo({address}, xfer::TransportChoice::kAuto);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(ExpectLookupsMatch(*client, root, model), 1u);
}

TEST(ServingReplicas, BadFlagsExitTwo) {
  TempDir dir;
  for (std::vector<std::string> flags :
       {std::vector<std::string>{},
        {"--checkpoint_dir=" + dir.path(), "--shards=a"},
        {"--checkpoint_dir=" + dir.path(), "--poll_ms=0"},
        {"--checkpoint_dir=" + dir.path(), "--max_keys=0"}}) {
    launch::ProcessSpec spec;
    spec.argv = {PS_SERVE_BIN};
    spec.argv.insert(spec.argv.end(), flags.begin(), flags.end());
    spec.log_path = JoinPath(dir.path(), "bad.log");
    spec.name = "bad";
    auto p = launch::Process::Spawn(spec);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->WaitExit(10000), std::optional<int>(2))
        << (flags.empty() ? "no flags" : flags.back());
  }
}

}  // namespace
}  // namespace ps::serving
