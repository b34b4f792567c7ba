#include "checkpoint/committer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "checkpoint/best_marker.h"
#include "checkpoint/layout.h"

namespace ps::checkpoint {

StatusOr<proto::Manifest> CommitCheckpoint(const CommitRequest& r) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + r.wait;
  proto::Manifest m;
  m.set_format_version(kFormatVersion);
  m.set_step(r.step);
  m.set_num_shards(r.num_shards);
  for (const auto& t : r.tables) *m.add_tables() = t;
  for (const auto& w : r.workers) *m.add_workers() = w;

  std::vector<proto::ShardEntry> entries(r.num_shards);
  std::vector<bool> have(r.num_shards, false);
  for (;;) {
    std::string missing;
    for (uint32_t k = 0; k < r.num_shards; ++k) {
      if (have[k]) continue;
      auto payload =
          ReadFramedFile(JoinPath(r.checkpoint_dir, ShardDoneName(k)));
      if (payload.ok()) {
        if (!entries[k].ParseFromString(*payload) ||
            entries[k].shard_id() != k) {
          return Corruption(JoinPath(r.checkpoint_dir, ShardDoneName(k)) +
                            ": not shard " + std::to_string(k) + "'s entry");
        }
        have[k] = true;
        continue;
      }
      if (!payload.status().Is(StatusCode::kNotFound)) return payload.status();
      missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    }
    if (missing.empty()) break;
    if (Clock::now() >= deadline) {
      return Timeout(r.checkpoint_dir + ": shard(s) " + missing +
                     " did not finish writing; the checkpoint stays "
                     "incomplete");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  uint64_t total = 0;
  for (uint32_t k = 0; k < r.num_shards; ++k) {
    const proto::ShardEntry& e = entries[k];
    if (e.kind() != entries[0].kind() || e.parent() != entries[0].parent()) {
      return Corruption(
          r.checkpoint_dir + ": shard " + std::to_string(k) + " wrote a " +
          (e.kind() == proto::FULL ? "full" : "incremental") +
          " checkpoint (parent '" + e.parent() + "') but shard 0 a " +
          (entries[0].kind() == proto::FULL ? "full" : "incremental") +
          " one (parent '" + entries[0].parent() + "')");
    }
    total += e.bytes();
    *m.add_shards() = e;
  }
  m.set_kind(entries[0].kind());
  m.set_parent(entries[0].parent());
  m.set_total_bytes(total);
  m.set_created_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
  PS_RETURN_IF_ERROR(WriteManifest(r.checkpoint_dir, m));
  return m;
}

namespace {

// Deletes one checkpoint so that it never reads as complete with files
// missing: the MANIFEST goes first, durably, then the rest.
Status DeleteCheckpoint(const CheckpointInfo& c) {
  const std::string manifest = JoinPath(c.path, kManifestName);
  if (::unlink(manifest.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(StatusCode::kIOError, "delete " + manifest, errno);
  }
  // Until this fsync, a power loss could bring the MANIFEST back after the
  // parent is gone. A directory another process deleted meanwhile needs none.
  Status synced = SyncDirectory(c.path);
  std::error_code ec;
  if (!synced.ok() && std::filesystem::exists(c.path, ec)) return synced;
  return RemoveTree(c.path).WithContext("retention");
}

}  // namespace

StatusOr<std::vector<std::string>> ApplyRetention(const std::string& root,
                                                  uint32_t keep,
                                                  const RetentionHooks& hooks) {
  std::vector<std::string> deleted;
  if (keep == 0) return deleted;
  PS_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> all, ListCheckpoints(root));
  std::map<std::string, const CheckpointInfo*> by_name;
  uint64_t newest_complete = 0;
  bool any_complete = false;
  for (const auto& c : all) {
    by_name[c.name] = &c;
    if (c.complete) {
      newest_complete = c.step;
      any_complete = true;
    }
  }
  if (!any_complete) return deleted;
  std::set<std::string> retained;
  // The checkpoint and its chain of parents.
  auto retain = [&](const CheckpointInfo* c) {
    while (c != nullptr) {
      if (!retained.insert(c->name).second) break;
      if (!c->complete || c->manifest.parent().empty()) break;
      auto p = by_name.find(c->manifest.parent());
      c = p == by_name.end() ? nullptr : p->second;
    }
  };
  uint32_t kept = 0;
  for (auto it = all.rbegin(); it != all.rend() && kept < keep; ++it) {
    if (!it->complete) continue;
    ++kept;
    retain(&*it);
  }
  // The best checkpoint (--early_stop) is exempt. A marker that does not
  // read back stops retention rather than risk deleting what it names.
  auto best = ReadBestMarker(root);
  if (!best.ok() && !best.status().Is(StatusCode::kNotFound)) {
    return best.status().WithContext("retention keeps everything");
  }
  if (best.ok()) {
    auto b = by_name.find(CheckpointDirName(best->step()));
    if (b != by_name.end() && b->second->complete) retain(b->second);
  }
  // Newest first: a parent is always older than its children, so by the
  // time a parent loses its MANIFEST no remaining complete checkpoint
  // depends on it (the retained ones never do: their chains are retained).
  // Oldest first left incrementals that read as complete on a deleted base
  // when a kill came in the middle.
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const CheckpointInfo& c = *it;
    if (retained.count(c.name)) continue;
    if (!c.complete && c.step >= newest_complete) continue;  // in progress
    if (hooks.before_delete) hooks.before_delete(c.path);
    PS_RETURN_IF_ERROR(DeleteCheckpoint(c));
    deleted.push_back(c.path);
  }
  return deleted;
}

StatusOr<std::vector<std::string>> FreeSpaceForCheckpoint(
    const std::string& root, const RetentionHooks& hooks) {
  return ApplyRetention(root, 1, hooks);
}

}  // namespace ps::checkpoint
