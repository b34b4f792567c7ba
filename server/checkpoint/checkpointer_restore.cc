// Checkpointer's restore (--restore_from): the candidates, newest first;
// loading this shard's part of one into its tables; and the agreement that
// every shard restores the same candidate or none starts (RESTORE verdicts
// asked of and answered to the other shards).
#include <glog/logging.h>

#include <filesystem>
#include <set>

#include "checkpoint/best_marker.h"
#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_writer.h"
#include "server/checkpoint/checkpointer.h"
#include "server/checkpoint/checkpointer_internal.h"

namespace ps::server {

namespace ck = ps::checkpoint;
using checkpointer_internal::Clock;
using checkpointer_internal::Reply;
using checkpointer_internal::Seconds;

void Checkpointer::RemoveInterruptedParts() {
  auto list = ck::ListCheckpoints(options_.dir);
  if (!list.ok()) return;  // no directory yet
  const uint32_t k = shard_->shard_id();
  for (const ck::CheckpointInfo& c : *list) {
    if (c.complete || c.manifest_status.code() != StatusCode::kNotFound) {
      continue;
    }
    const std::string part = ck::JoinPath(c.path, ck::ShardDirName(k));
    std::error_code ec;
    if (!std::filesystem::exists(part, ec) &&
        !std::filesystem::exists(part + ".sst-tmp", ec) &&
        !std::filesystem::exists(ck::JoinPath(c.path, ck::ShardDoneName(k)),
                                 ec)) {
      continue;
    }
    LOG(INFO) << "removing shard " << k << "'s part of the interrupted "
              << "checkpoint " << c.path;
    if (Status s = ck::RemoveShardPart(c.path, k); !s.ok()) {
      LOG(WARNING) << s;
    }
  }
}

StatusOr<ck::RestoreResult> Checkpointer::RestoreFrom(const std::string& path) {
  ck::RestoreTarget target;
  target.shard_id = shard_->shard_id();
  target.num_shards = shard_->num_shards();
  // Each table says where the reader puts its rows (its own memory, or
  // buffers it loads from: a device table uploads them, an exact table
  // indexes them).
  for (const auto& t : shard_->tables()) {
    ck::TableTarget tt;
    tt.spec = t->spec();
    PS_RETURN_IF_ERROR(t->table().PrepareRestore(&tt));
    target.tables.push_back(std::move(tt));
  }
  PS_ASSIGN_OR_RETURN(ck::RestoreResult r, ck::RestoreShard(path, &target));
  for (size_t i = 0; i < target.tables.size(); ++i) {
    PS_RETURN_IF_ERROR(
        shard_->tables()[i]->table().FinishRestore(&target.tables[i]));
  }
  return r;
}

Status Checkpointer::AgreeOnRestore(uint64_t step) {
  if (peers_ == nullptr || shard_->num_shards() == 1) return Status::OK();
  const auto give_up =
      Clock::now() + std::chrono::seconds(options_.restore_wait_secs);
  std::set<uint32_t> waiting;
  for (uint32_t j = 0; j < shard_->num_shards(); ++j) {
    if (j != shard_->shard_id()) waiting.insert(j);
  }
  proto::CheckpointRequest ask;
  ask.set_action(proto::CheckpointRequest::RESTORE);
  ask.set_step(step);
  ask.set_from_shard(shard_->shard_id());
  auto last_log = Clock::now();
  while (!waiting.empty()) {
    std::string why_waiting;
    for (auto it = waiting.begin(); it != waiting.end();) {
      const uint32_t j = *it;
      auto r = peers_->Ask(j, ask);
      if (r.ok() && r->verdict() == Reply::NOT_RESTORED) {
        std::lock_guard<std::mutex> lock(mu_);
        known_not_restored_.insert({j, step});  // it needs no answer of ours
        return Corruption("shard " + std::to_string(j) + ": " +
                          r->verdict_error());
      }
      if (r.ok() && r->verdict() == Reply::RESTORED) {
        it = waiting.erase(it);
        continue;
      }
      why_waiting += "\n  shard " + std::to_string(j) + ": " +
                     (r.ok() ? "still loading" : r.status().ToString());
      ++it;
    }
    if (waiting.empty()) break;
    if (Clock::now() >= give_up) {
      return Timeout(
          "the other shards did not all answer within "
          "--restore_wait_secs=" +
          std::to_string(options_.restore_wait_secs) +
          " (start every shard of the cluster):" + why_waiting);
    }
    if (Clock::now() - last_log >= std::chrono::seconds(10)) {
      LOG(INFO) << "restore of step " << step << ": waiting for" << why_waiting;
      last_log = Clock::now();
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(100),
                     [this] { return stopping_; })) {
      return Cancelled("the server is stopping");
    }
  }
  return Status::OK();
}

void Checkpointer::SetVerdict(uint64_t step, const Status& verdict) {
  std::lock_guard<std::mutex> lock(mu_);
  Reply& v = verdicts_[step];
  v.set_verdict(verdict.ok() ? Reply::RESTORED : Reply::NOT_RESTORED);
  v.set_verdict_error(verdict.ok() ? "" : verdict.ToString());
}

void Checkpointer::LingerUntilHeard(uint64_t last_step) {
  if (peers_ == nullptr || shard_->num_shards() == 1) return;
  // Done with shard j once it asked for our verdict on the last candidate,
  // or once it answers that it restores that one neither (then it does not
  // need ours).
  const auto give_up =
      Clock::now() + std::chrono::seconds(options_.restore_wait_secs);
  proto::CheckpointRequest ask;
  ask.set_action(proto::CheckpointRequest::RESTORE);
  ask.set_step(last_step);
  ask.set_from_shard(shard_->shard_id());
  std::set<uint32_t> done;
  for (;;) {
    for (uint32_t j = 0; j < shard_->num_shards(); ++j) {
      if (j == shard_->shard_id() || done.count(j)) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (askers_.count({j, last_step}) ||
            known_not_restored_.count({j, last_step})) {
          done.insert(j);
          continue;
        }
      }
      auto r = peers_->Ask(j, ask);
      if (r.ok() && r->verdict() == Reply::NOT_RESTORED) done.insert(j);
    }
    if (done.size() + 1 >= shard_->num_shards()) return;
    std::unique_lock<std::mutex> lock(mu_);
    if (Clock::now() >= give_up ||
        cv_.wait_for(lock, std::chrono::milliseconds(100),
                     [this] { return stopping_; })) {
      LOG(WARNING) << "not every shard heard this shard's restore verdicts "
                      "within --restore_wait_secs";
      return;
    }
  }
}

Status Checkpointer::Restore() {
  if (!options_.dir.empty()) RemoveInterruptedParts();
  if (options_.restore_from.empty()) return Status::OK();
  const std::string what = "--restore_from=" + options_.restore_from;
  // The candidates, newest first: every shard lists the same folder, so
  // every shard walks the same list.
  struct Candidate {
    std::string path;
    uint64_t step = 0;
    Status manifest;  // not OK: a damaged MANIFEST (a failed candidate)
  };
  std::vector<Candidate> candidates;
  if (options_.restore_from == "latest") {
    auto all = ck::ListCheckpoints(options_.dir);
    if (!all.ok()) return all.status().WithContext(what);
    for (auto it = all->rbegin(); it != all->rend(); ++it) {
      // Interrupted before its MANIFEST was renamed into place: it never
      // existed as a checkpoint. A MANIFEST that exists but does not read
      // back is damage (the rename is atomic).
      if (!it->complete && it->manifest_status.Is(StatusCode::kNotFound)) {
        continue;
      }
      candidates.push_back({it->path, it->step, it->manifest_status});
      if (!options_.restore_fallback) break;
    }
    if (candidates.empty()) {
      return NotFound(what + ": no complete checkpoint under " + options_.dir);
    }
  } else if (options_.restore_from == "best") {
    // The one ps_worker --early_stop found best: no fallback to another,
    // which would not be the best.
    auto best = ck::ReadBestMarker(options_.dir);
    if (!best.ok()) {
      return best.status().WithContext(
          what + ": no best checkpoint marked under " + options_.dir +
          " (ps_worker --early_stop marks one)");
    }
    candidates.push_back(
        {ck::JoinPath(options_.dir, ck::CheckpointDirName(best->step())),
         best->step(), Status::OK()});
  } else {
    uint64_t step = 0;
    std::string name =
        std::filesystem::path(options_.restore_from).filename().string();
    if (name.empty()) {
      name = std::filesystem::path(options_.restore_from)
                 .parent_path()
                 .filename()
                 .string();
    }
    if (!ck::ParseCheckpointDirName(name, &step)) {
      return InvalidArgument(what + ": not a checkpoint directory (ckpt-N)");
    }
    candidates.push_back({options_.restore_from, step, Status::OK()});
  }

  const auto start = Clock::now();
  std::string failures;
  for (const Candidate& c : candidates) {
    StatusOr<ck::RestoreResult> r =
        c.manifest.ok() ? RestoreFrom(c.path)
                        : StatusOr<ck::RestoreResult>(c.manifest);
    SetVerdict(c.step, r.status().WithContext(
                           "shard " + std::to_string(shard_->shard_id())));
    Status agreed = r.status();
    if (r.ok()) {
      LOG(INFO) << "shard " << shard_->shard_id() << " loaded its part of "
                << c.path << "; waiting for the other shards' verdicts";
      agreed = AgreeOnRestore(c.step);
      // Another shard's failure rules the candidate out here too: a shard
      // that asks this one later must not take it (one cut for all).
      if (!agreed.ok()) SetVerdict(c.step, agreed);
    }
    if (agreed.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      restored_ = true;
      restored_manifest_ = r->manifest;
      restored_from_ = r->path;
      last_cut_step_ = r->manifest.step();
      outcomes_.newest_complete_step = r->manifest.step();
      LOG(INFO) << "restored shard " << shard_->shard_id() << " of "
                << shard_->num_shards() << " from " << r->path << " (step "
                << r->manifest.step() << ", " << r->manifest.num_shards()
                << " shards, chain of " << r->chain.size() << ", "
                << r->bytes_read / 1e6 << " MB read) in "
                << Seconds(Clock::now() - start)
                << (failures.empty() ? "" : "; skipped:" + failures);
      return Status::OK();
    }
    if (agreed.Is(StatusCode::kTimeout) || agreed.Is(StatusCode::kCancelled)) {
      SetVerdict(c.step, agreed);
      return agreed.WithContext(what + ": " + c.path);
    }
    failures += "\n  " + c.path + ": " + agreed.ToString();
    if (options_.restore_fallback && &c != &candidates.back()) {
      LOG(WARNING) << c.path << " does not restore on every shard (" << agreed
                   << "); all shards fall back to the previous one";
    }
  }
  LingerUntilHeard(candidates.back().step);
  return Corruption(what + ": no checkpoint restores on every shard" +
                    (options_.restore_fallback
                         ? ""
                         : " (--restore_fallback tries older ones)") +
                    ":" + failures);
}

}  // namespace ps::server
