// ServingClient: looks up rows on serving replicas (ps_serve).
//
//   ServingClient::Options o;
//   o.replicas = {"10.0.0.5:7100", "10.0.0.6:7100"};   // control addresses
//   auto client = ServingClient::Connect(o).value();
//   std::vector<float> rows(keys.size() * client->table("emb")->dim());
//   auto r = client->Lookup("emb", keys, rows).value();
//   // r.step: the checkpoint every row of this lookup came from
//
// Connect attaches to the first replica that answers (say hello on its
// control port, register a reply region, learn its request region); each
// Lookup then writes one lookup packet into the replica's memory and waits
// for the rows to land in the reply region (protocol/serving_lookup.h):
// over shm on the same host, tcp (or verbs) otherwise. The replica dials
// this client's own xfer listener (Options::xfer: its listen_host must be
// reachable from the replicas; loopback by default).
//
// What a lookup returns: the keys' rows, all from the one checkpoint the
// result names; HASHED rows by the hashing trick, DENSE rows by index, and
// for an EXACT key without a row, zeros (counted in Result::missing).
//
// Failover: a replica that is lost (kPeerLost, kTimeout, kNetwork)
// during a lookup is left for the next one in the list (then the one after,
// once each); the lookup is sent again there, so it returns rows of
// whichever checkpoint that replica serves. A refusal (a bad key, an
// unknown table) is an answer, not a failure: it is returned as it is.
//
// Thread-safety: Lookup may be called from several threads; they take
// turns (one lookup in flight per client).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "core/context.h"
#include "core/context_options.h"
#include "protocol/control_channel.h"
#include "protocol/ps.pb.h"

namespace ps::serving {

class ServingClient {
 public:
  struct Options {
    std::vector<std::string> replicas;  // control addresses, tried in order
    // This client's context: transport, listener, cluster secret (which
    // the control hello uses too).
    xfer::ContextOptions xfer = xfer::ContextOptions::WithPeerTimeout(10000);
    int timeout_ms = 10000;  // a lookup (or hello) without an answer
  };
  static StatusOr<std::unique_ptr<ServingClient>> Connect(Options options);
  ~ServingClient();

  struct Result {
    uint64_t step = 0;            // the checkpoint the rows come from
    int64_t created_unix_ms = 0;  // when it was committed
    uint32_t missing = 0;         // EXACT keys without a row (zeros)
    std::string replica;          // which answered
  };
  // Fills `out` (keys.size() x dim floats) with the keys' rows; returns
  // once they are there. kInvalidArgument for an unknown table, a wrong
  // `out` size or more than max_keys() keys (nothing is sent);
  // the replica's refusal as it gave it; kPeerLost when every replica
  // failed.
  StatusOr<Result> Lookup(const std::string& table,
                          std::span<const uint64_t> keys, std::span<float> out);

  // A table the replicas serve (nullptr: none of that name); the pointer
  // stays valid as long as the client.
  const proto::TableSpec* table(const std::string& name) const;
  uint32_t max_keys() const;    // of the replica attached to last
  std::string replica() const;  // attached to now ("": none, after a loss)

 private:
  struct Attached;
  explicit ServingClient(Options options);
  // Attaches to replicas_[index].
  Status Attach(size_t index);
  StatusOr<Result> LookupOnce(const proto::TableSpec& spec,
                              std::span<const uint64_t> keys,
                              std::span<float> out);

  const Options options_;
  std::unique_ptr<xfer::Context> context_;
  mutable std::mutex mu_;
  std::unique_ptr<Attached> attached_;  // guarded by mu_
  // Tables as the replicas attached to so far named them (guarded by mu_).
  std::map<std::string, proto::TableSpec> specs_;
  size_t current_ = 0;  // index into options_.replicas
  uint32_t max_keys_ = 0;
  uint64_t next_request_ = 1;
};

}  // namespace ps::serving
