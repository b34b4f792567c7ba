// Checkpointer's background write of one cut: full or incremental (the
// rows changed since the previous copy), the retry after freeing space, and
// on shard 0 the commit of the MANIFEST once every part is on disk
// (checkpointer_parts.cc waits for them), the best mark (early stopping),
// then retention.
#include <glog/logging.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "checkpoint/committer.h"
#include "checkpoint/layout.h"
#include "checkpoint/shard_writer.h"
#include "server/checkpoint/checkpointer.h"
#include "server/checkpoint/checkpointer_internal.h"

namespace ps::server {

namespace ck = ps::checkpoint;
using checkpointer_internal::Clock;
using checkpointer_internal::kPartPoll;
using checkpointer_internal::Reply;
using checkpointer_internal::Seconds;

namespace {

// Whether a failed write failed for lack of space (worth freeing some).
bool OutOfSpace(const Status& s) {
  const std::string& m = s.message();
  return m.find("No space left") != std::string::npos ||
         m.find("Disk quota exceeded") != std::string::npos;
}

// Wall-clock time, Unix seconds: what a checkpoint's age is measured from
// (`time() - ps_server_checkpoint_last_time_seconds` in PromQL).
double UnixSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Rows of `now` whose values or optimizer state differ from `before` (same
// table, same layout, both full copies): the incremental checkpoint's rows.
ck::TableSnapshot ChangedRows(const ck::TableSnapshot& now,
                              const ck::TableSnapshot& before) {
  ck::TableSnapshot d;
  d.spec = now.spec;
  d.full = false;
  d.first_row = now.first_row;
  d.rows = now.rows;
  d.state_arrays = now.state_arrays;
  d.optimizer_steps = now.optimizer_steps;
  const size_t dim = now.dim(), bytes = dim * sizeof(float);
  for (uint64_t r = 0; r < now.rows; ++r) {
    bool changed =
        std::memcmp(&now.values[r * dim], &before.values[r * dim], bytes) != 0;
    for (int k = 0; !changed && k < now.state_arrays; ++k) {
      changed = std::memcmp(&now.state[k][r * dim], &before.state[k][r * dim],
                            bytes) != 0;
    }
    if (!changed) continue;
    d.ids.push_back(now.first_row + r);
    d.values.insert(d.values.end(), now.values.begin() + r * dim,
                    now.values.begin() + (r + 1) * dim);
    for (int k = 0; k < now.state_arrays; ++k) {
      d.state[k].insert(d.state[k].end(), now.state[k].begin() + r * dim,
                        now.state[k].begin() + (r + 1) * dim);
    }
  }
  return d;
}

// What the baseline of the next increment keeps of an EXACT table's
// snapshot (EXACT tables are written whole each time): its spec, no rows.
ck::TableSnapshot ForgetRows(const ck::TableSnapshot& t) {
  ck::TableSnapshot kept;
  kept.spec = t.spec;
  kept.state_arrays = t.state_arrays;
  return kept;
}

}  // namespace

bool Checkpointer::IncrementalPossible() {
  if (!previous_ || options_.full_every <= 1) return false;
  // The parent must be complete (committed by shard 0), and every shard
  // must come to the same answer from the folder. A cut waits until shard 0
  // settled the previous checkpoint (POSITION), but a final cut on stop does
  // not: wait here until the parent is committed (its MANIFEST) or abandoned
  // (its directory gone).
  const std::string parent =
      ck::JoinPath(options_.dir, ck::CheckpointDirName(previous_->step));
  const auto give_up =
      Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  for (;;) {
    std::error_code ec;
    if (ck::ReadManifest(parent).ok() || !std::filesystem::exists(parent, ec) ||
        Clock::now() >= give_up) {
      break;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, kPartPoll, [this] { return aborted_; })) break;
  }
  auto chain = ck::ResolveChain(parent);
  if (!chain.ok()) return false;
  // chain: the full base first; the new one would be increment number
  // chain->size() of it.
  return chain->size() < options_.full_every;
}

void Checkpointer::Write(Job job) {
  const uint64_t step = job.snapshot.step;
  const uint32_t k = shard_->shard_id();
  const std::string dir =
      ck::JoinPath(options_.dir, ck::CheckpointDirName(step));
  if (ck::ReadManifest(dir).ok()) {
    // A checkpoint of this step from an earlier run (one restored past it,
    // a damaged one say): its rows are another history. Not overwritten,
    // and not taken for this one either.
    Status stale =
        IOError(dir +
                " is a complete checkpoint of an earlier run; move it away to "
                "checkpoint this step again");
    LOG(ERROR) << "checkpoint step " << step << " shard " << k
               << " failed: " << stale;
    part_stats_.failed.fetch_add(1, std::memory_order_relaxed);
    SetPart(step, Reply::FAILED, stale.ToString());
    if (k == 0) Settle(step, stale);
    previous_.reset();
    return;
  }
  const bool full = !IncrementalPossible();
  ck::ShardWriteOptions wo;
  wo.kind = full ? ck::proto::FULL : ck::proto::INCREMENTAL;
  wo.threads = options_.write_threads;
  wo.cut_pause_ms = job.pause_ms;
  if (options_.test_hold_step != 0 && step == options_.test_hold_step) {
    wo.after_files = [this, step, k] {
      LOG(WARNING) << "test hold: checkpoint step " << step << " shard " << k
                   << " half-written, holding (--test_hold_checkpoint_step)";
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(60),
                   [this] { return stop_ || stopping_; });
    };
  }
  ck::ShardSnapshot to_write;
  const ck::ShardSnapshot* write = &job.snapshot;
  if (!full) {
    wo.parent = ck::CheckpointDirName(previous_->step);
    to_write.step = step;
    to_write.shard_id = job.snapshot.shard_id;
    to_write.num_shards = job.snapshot.num_shards;
    for (size_t i = 0; i < job.snapshot.tables.size(); ++i) {
      ck::TableSnapshot& t = job.snapshot.tables[i];
      if (t.spec.kind() == ps::proto::EXACT) {
        // Always whole; the baseline keeps none of its rows (below).
        ck::TableSnapshot whole = std::move(t);
        t = ForgetRows(whole);
        to_write.tables.push_back(std::move(whole));
      } else {
        to_write.tables.push_back(ChangedRows(t, previous_->tables[i]));
      }
    }
    write = &to_write;
  }
  auto entry = ck::WriteShard(dir, *write, wo);
  if (!entry.ok() && OutOfSpace(entry.status())) {
    // Make room the way retention would, keeping the newest complete
    // checkpoint and its parents, then try once more.
    auto freed = ck::FreeSpaceForCheckpoint(options_.dir);
    if (freed.ok() && !freed->empty()) {
      for (const auto& d : *freed) {
        LOG(WARNING) << "checkpoint step " << step << " shard " << k
                     << ": out of space; deleted " << d << " to make room";
      }
      entry = ck::WriteShard(dir, *write, wo);
    } else if (!freed.ok()) {
      LOG(WARNING) << "freeing space for checkpoint step " << step << ": "
                   << freed.status();
    }
  }
  if (!entry.ok()) {
    LOG(ERROR) << "checkpoint step " << step << " shard " << k
               << " failed: " << entry.status()
               << " (nothing of it is left on disk)";
    // The baseline is of no use once this shard's part is missing: the
    // next checkpoint is full on every shard (IncrementalPossible).
    previous_.reset();
    part_stats_.failed.fetch_add(1, std::memory_order_relaxed);
    SetPart(step, Reply::FAILED, entry.status().ToString());
    if (k == 0) {
      Settle(step, entry.status().WithContext("shard 0"));
      (void)ck::RemoveTree(dir);  // the other shards' parts are of no use
      MarkBestIfComplete(/*abandoned=*/step);
    }
    return;
  }
  // The baseline of the next increment needs no rows of EXACT tables
  // (written whole each time): their copies and spilled rows go now, and
  // their linked files, so that the disk tier's compactions free space.
  for (ck::TableSnapshot& t : job.snapshot.tables) {
    if (t.spec.kind() == ps::proto::EXACT) t = ForgetRows(t);
  }
  previous_ = std::move(job.snapshot);
  SetPart(step, Reply::WRITTEN);
  constexpr auto kRelaxed = std::memory_order_relaxed;
  part_stats_.last_step.store(step, kRelaxed);
  part_stats_.last_bytes.store(entry->bytes(), kRelaxed);
  part_stats_.last_pause_seconds.store(job.pause_ms / 1e3, kRelaxed);
  part_stats_.last_write_seconds.store(entry->write_ms() / 1e3, kRelaxed);
  part_stats_.last_time_seconds.store(UnixSeconds(), kRelaxed);
  part_stats_.written.fetch_add(1, kRelaxed);
  LOG(INFO) << "checkpoint step " << step << " shard " << k << ": "
            << (full ? "full" : "incremental of " + wo.parent) << ", "
            << entry->entries() << " entries, " << entry->bytes() / 1e6
            << " MB (" << entry->linked_bytes() / 1e6
            << " MB of it linked from the disk tier), cut pause "
            << job.pause_ms << " ms, write " << entry->write_ms() << " ms";
  if (k != 0) return;
  const auto waited = Clock::now();
  uint64_t total_bytes = 0;
  Status committed = AwaitParts(step, dir);
  if (committed.ok()) {
    ck::CommitRequest c;
    c.checkpoint_dir = dir;
    c.step = step;
    c.num_shards = shard_->num_shards();
    c.tables.assign(shard_->config().table().begin(),
                    shard_->config().table().end());
    c.workers = job.positions;
    auto m = ck::CommitCheckpoint(c);
    committed = m.status();
    if (m.ok()) total_bytes = m->total_bytes();
  }
  if (!committed.ok()) {
    const Status removed = ck::RemoveTree(dir);
    LOG(ERROR) << "checkpoint step " << step << " abandoned after "
               << Seconds(Clock::now() - waited) << ": " << committed << "; "
               << (removed.ok() ? "deleted " + dir : removed.ToString());
    Settle(step, committed);
    MarkBestIfComplete(/*abandoned=*/step);
    return;
  }
  part_stats_.last_complete_time_seconds.store(UnixSeconds(), kRelaxed);
  LOG(INFO) << "checkpoint " << dir << " complete (" << total_bytes / 1e6
            << " MB)";
  Settle(step, Status::OK());
  // Before retention: a best mark waiting for this checkpoint moves now.
  MarkBestIfComplete();
  auto deleted = ck::ApplyRetention(options_.dir, options_.keep);
  if (!deleted.ok()) {
    LOG(WARNING) << "retention: " << deleted.status();
  } else {
    for (const auto& d : *deleted) LOG(INFO) << "retention deleted " << d;
  }
}

}  // namespace ps::server
