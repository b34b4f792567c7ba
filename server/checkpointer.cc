#include "server/checkpointer.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>

#include "checkpoint/committer.h"
#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_writer.h"

namespace ps::server {
namespace {

namespace ck = ps::checkpoint;
using Clock = std::chrono::steady_clock;
using Reply = proto::CheckpointReply;

// A cut step this large is refused: the final checkpoint on stop takes the
// next step, and a forged 2^64-1 must not wrap it around.
constexpr uint64_t kMaxCutStep = uint64_t{1} << 62;
// How many steps' part states a shard remembers for PART answers.
constexpr size_t kPartsKept = 16;
// How long a stopping server still waits for another shard that does not
// answer or has not cut yet: the shards' stops are not coordinated, so a
// peer may be a moment behind, but not longer.
constexpr auto kStopGrace = std::chrono::seconds(2);
// Requests and map entries a peer may make us keep, at most.
constexpr size_t kMaxPendingSteps = 1024;
// How often shard 0 looks for missing parts while it waits.
constexpr auto kPartPoll = std::chrono::milliseconds(50);

// Whether a failed write failed for lack of space (worth freeing some).
bool OutOfSpace(const Status& s) {
  const std::string& m = s.message();
  return m.find("No space left") != std::string::npos ||
         m.find("Disk quota exceeded") != std::string::npos;
}

std::string Seconds(std::chrono::nanoseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s",
                std::chrono::duration<double>(d).count());
  return buf;
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

}  // namespace

Status ValidateCheckpointOptions(const CheckpointOptions& o) {
  if (o.dir.empty()) {
    if (o.every_steps || o.every_secs) {
      return InvalidArgument(
          "--checkpoint_every_steps/--checkpoint_every_secs need "
          "--checkpoint_dir");
    }
    if (o.restore_from == "latest") {
      return InvalidArgument("--restore_from=latest needs --checkpoint_dir");
    }
  }
  if (!o.restore_from.empty() && o.restore_from != "latest" &&
      o.restore_from.find('/') == std::string::npos) {
    return InvalidArgument(
        "--restore_from must be 'latest' or a checkpoint "
        "directory path, not '" +
        o.restore_from + "'");
  }
  if (o.full_every == 0) {
    return InvalidArgument("--checkpoint_full_every must be at least 1");
  }
  if (o.timeout_ms <= 0) {
    return InvalidArgument("--timeout_ms must be positive");
  }
  return Status::OK();
}

Checkpointer::Checkpointer(CheckpointOptions options, Shard* shard,
                           PeerRegistry* peers, uint64_t instance)
    : options_(std::move(options)),
      shard_(shard),
      peers_(peers),
      instance_(instance),
      last_cut_time_(Clock::now()) {
  if (!options_.dir.empty()) writer_ = std::thread([this] { WriterLoop(); });
}

Checkpointer::~Checkpointer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = stopping_ = aborted_ = true;
    cv_.notify_all();
  }
  if (writer_.joinable()) writer_.join();
}

void Checkpointer::BeginStop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

void Checkpointer::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = aborted_ = true;
  cv_.notify_all();
}

bool Checkpointer::stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

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
  for (const auto& t : shard_->tables()) {
    ck::TableTarget tt;
    tt.spec = t->spec();
    if (t->exact()) {
      tt.state_arrays = t->exact_table()->state_arrays_;
    } else {
      table::ParamTable* p = t->params();
      tt.state_arrays = p->state_arrays();
      tt.first_row = p->first_row();
      tt.rows = p->num_rows();
      tt.values = p->data();
      for (int k = 0; k < tt.state_arrays; ++k) tt.state[k] = p->state(k);
    }
    target.tables.push_back(std::move(tt));
  }
  PS_ASSIGN_OR_RETURN(ck::RestoreResult r, ck::RestoreShard(path, &target));
  for (size_t i = 0; i < target.tables.size(); ++i) {
    TableShard* t = shard_->tables()[i].get();
    ck::TableTarget& tt = target.tables[i];
    if (!t->exact()) {
      t->params()->set_optimizer_steps(tt.optimizer_steps);
      continue;
    }
    ExactTable* e = t->exact_table();
    std::lock_guard<std::mutex> lock(e->mu_);
    e->FreeAllRows();  // an earlier candidate's rows must not stay
    // Oldest first, so the least-recently-updated list comes out in order.
    std::vector<size_t> order(tt.exact.ids.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return tt.exact.last_update[a] < tt.exact.last_update[b];
    });
    const size_t dim = t->dim();
    for (size_t i2 : order) {
      const uint32_t row = e->AllocateRow(tt.exact.ids[i2]);
      if (row == ExactTable::kNoRow) {
        return ResourceExhausted("restoring exact table '" + t->spec().name() +
                                 "': " + std::to_string(tt.exact.ids.size()) +
                                 " keys exceed its capacity of " +
                                 std::to_string(e->capacity_) +
                                 " rows per shard");
      }
      std::memcpy(e->values_.data() + uint64_t{row} * dim,
                  &tt.exact.values[i2 * dim], dim * sizeof(float));
      for (int k = 0; k < tt.state_arrays; ++k) {
        std::memcpy(e->state_[k].data() + uint64_t{row} * dim,
                    &tt.exact.state[k][i2 * dim], dim * sizeof(float));
      }
      e->Touch(row, tt.exact.last_update[i2]);
    }
    e->optimizer_steps_ = tt.optimizer_steps;
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

ck::ShardSnapshot Checkpointer::Copy() const {
  ck::ShardSnapshot snap;
  snap.shard_id = shard_->shard_id();
  snap.num_shards = shard_->num_shards();
  for (const auto& t : shard_->tables()) {
    ck::TableSnapshot s;
    s.spec = t->spec();
    if (t->exact()) {
      ExactTable* e = t->exact_table();
      std::lock_guard<std::mutex> lock(e->mu_);
      s.state_arrays = e->state_arrays_;
      s.optimizer_steps = e->optimizer_steps_;
      const size_t dim = t->dim();
      for (const auto& [key, row] : e->row_of_key_) {
        s.ids.push_back(key);
        s.values.insert(s.values.end(), e->values_.begin() + row * dim,
                        e->values_.begin() + (row + 1) * dim);
        for (int k = 0; k < s.state_arrays; ++k) {
          s.state[k].insert(s.state[k].end(), e->state_[k].begin() + row * dim,
                            e->state_[k].begin() + (row + 1) * dim);
        }
        s.last_update.push_back(e->last_update_[row]);
      }
    } else {
      const table::ParamTable* p = t->params();
      s.first_row = p->first_row();
      s.rows = p->num_rows();
      s.state_arrays = p->state_arrays();
      // Nothing is applied during the cut (the workers wait in a barrier
      // after WaitApplied), but that order runs through the workers and
      // shared memory; CopyTo takes the lock the apply threads of a
      // stateful optimizer take, which makes it visible here (and to TSan).
      // SGD applies without a lock and relies on the protocol alone.
      p->CopyTo(&s.values, s.state, &s.optimizer_steps);
    }
    snap.tables.push_back(std::move(s));
  }
  return snap;
}

void Checkpointer::SetPart(uint64_t step, Reply::PartState state,
                           std::string error) {
  std::lock_guard<std::mutex> lock(mu_);
  Part& p = parts_[step];
  p.state = state;
  p.error = std::move(error);
  while (parts_.size() > kPartsKept) parts_.erase(parts_.begin());
}

StatusOr<double> Checkpointer::Cut(uint64_t step, bool with_positions) {
  return CutLocked(step, with_positions, /*final_checkpoint=*/false);
}

StatusOr<double> Checkpointer::CutLocked(uint64_t step, bool with_positions,
                                         bool final_checkpoint) {
  if (options_.dir.empty()) {
    return InvalidArgument("this server has no --checkpoint_dir");
  }
  std::lock_guard<std::mutex> cut(cut_mu_);
  {
    // The previous checkpoint must be on disk before the next copy (its
    // copy is the next one's baseline, and memory holds two at most).
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      return (queue_.empty() && !writing_) || aborted_ ||
             (stopping_ && !final_checkpoint);
    });
    if (aborted_ || (stopping_ && !final_checkpoint)) {
      return Cancelled("server shard " + std::to_string(shard_->shard_id()) +
                       " is stopping: no cut at step " + std::to_string(step));
    }
    if (step <= last_cut_step_ || step >= kMaxCutStep) {
      return InvalidArgument("checkpoint step " + std::to_string(step) +
                             " is not after the last cut (step " +
                             std::to_string(last_cut_step_) + ")");
    }
  }
  const auto start = Clock::now();
  Job job;
  job.snapshot = Copy();
  job.pause_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  job.snapshot.step = step;
  SetPart(step, Reply::WRITING);
  std::lock_guard<std::mutex> lock(mu_);
  if (with_positions) {
    auto p = positions_.find(step);
    if (p != positions_.end()) {
      for (auto& [w, pos] : p->second) job.positions.push_back(pos);
    }
  }
  positions_.erase(positions_.begin(), positions_.upper_bound(step));
  due_.erase(due_.begin(), due_.upper_bound(step));
  last_cut_step_ = step;
  last_cut_time_ = Clock::now();
  const double pause = job.pause_ms;
  queue_.push_back(std::move(job));
  cv_.notify_all();
  return pause;
}

void Checkpointer::WriterLoop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    Write(std::move(job));
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    cv_.notify_all();
  }
}

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
      const ck::TableSnapshot& t = job.snapshot.tables[i];
      if (t.spec.kind() == ps::proto::EXACT) {
        to_write.tables.push_back(t);  // always whole
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
    SetPart(step, Reply::FAILED, entry.status().ToString());
    if (k == 0) {
      Settle(step, entry.status().WithContext("shard 0"));
      (void)ck::RemoveTree(dir);  // the other shards' parts are of no use
    }
    return;
  }
  previous_ = std::move(job.snapshot);
  SetPart(step, Reply::WRITTEN);
  LOG(INFO) << "checkpoint step " << step << " shard " << k << ": "
            << (full ? "full" : "incremental of " + wo.parent) << ", "
            << entry->entries() << " entries, " << entry->bytes() / 1e6
            << " MB, cut pause " << job.pause_ms << " ms, write "
            << entry->write_ms() << " ms";
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
    return;
  }
  LOG(INFO) << "checkpoint " << dir << " complete (" << total_bytes / 1e6
            << " MB)";
  Settle(step, Status::OK());
  auto deleted = ck::ApplyRetention(options_.dir, options_.keep);
  if (!deleted.ok()) {
    LOG(WARNING) << "retention: " << deleted.status();
  } else {
    for (const auto& d : *deleted) LOG(INFO) << "retention deleted " << d;
  }
}

Status Checkpointer::AwaitParts(uint64_t step, const std::string& dir) {
  if (peers_ == nullptr) return Status::OK();
  struct Watch {
    uint64_t instance = 0;
    // Since when it has been silent or without the cut.
    std::optional<Clock::time_point> stalled_since;
  };
  std::vector<Watch> watch(shard_->num_shards());
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  proto::CheckpointRequest ask;
  ask.set_action(proto::CheckpointRequest::PART);
  ask.set_step(step);
  ask.set_from_shard(shard_->shard_id());
  auto done = [&](uint32_t j) {
    std::error_code ec;
    return std::filesystem::exists(ck::JoinPath(dir, ck::ShardDoneName(j)), ec);
  };
  for (;;) {
    bool stopping_now, aborted_now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_now = stopping_;
      aborted_now = aborted_;
    }
    if (aborted_now) return Cancelled("the server is stopping");
    // Once stopping, a shard that is silent or has not cut yet gets a
    // moment, not timeout_ms: the stop must take seconds.
    const auto patience = stopping_now
                              ? std::min<Clock::duration>(timeout, kStopGrace)
                              : Clock::duration(timeout);
    bool missing = false;
    for (uint32_t j = 1; j < shard_->num_shards(); ++j) {
      if (done(j)) continue;
      missing = true;
      const std::string who = "shard " + std::to_string(j);
      const auto asked = Clock::now();
      auto r = peers_->Ask(j, ask);
      if (done(j)) continue;  // written while we asked (and maybe gone since)
      Watch& w = watch[j];
      const auto now = Clock::now();
      // Silent (or without the cut) since the question that found it so.
      auto stalled = [&] {
        if (!w.stalled_since) w.stalled_since = asked;
        return now - *w.stalled_since >= patience;
      };
      if (!r.ok()) {
        const Status& s = r.status();
        // Nobody listens at its address: it is down (a stopping shard
        // keeps listening until its final part is on disk).
        if (s.Is(StatusCode::kNetwork) || s.Is(StatusCode::kPeerLost)) {
          return PeerLost(who + " is down: " + s.ToString());
        }
        if (stalled()) {
          return PeerLost(who + " did not answer for " +
                          Seconds(now - *w.stalled_since) + ": " +
                          s.ToString());
        }
        continue;
      }
      if (w.instance != 0 && r->server_instance() != w.instance) {
        return PeerLost(who + " restarted while its part was awaited");
      }
      w.instance = r->server_instance();
      switch (r->part()) {
        case Reply::FAILED:
          return IOError(who + "'s part failed: " + r->part_error());
        case Reply::NOT_CUT:
          if (stalled()) {
            return Timeout(
                who + " did not receive the cut for step " +
                std::to_string(step) + " within " +
                Seconds(now - *w.stalled_since) +
                (stopping_now ? " (stopping)" : ": was worker 0 lost?"));
          }
          break;
        default:
          w.stalled_since.reset();  // WRITING, or WRITTEN a moment ago
          break;
      }
    }
    if (!missing) return Status::OK();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kPartPoll, [this] { return aborted_; });
  }
}

void Checkpointer::Settle(uint64_t step, const Status& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  Outcomes& o = outcomes_;
  o.last_step = step;
  o.last_failed = !outcome.ok();
  o.last_error = outcome.ok() ? "" : outcome.ToString();
  o.consecutive_failures = outcome.ok() ? 0 : o.consecutive_failures + 1;
  if (outcome.ok()) o.newest_complete_step = step;
}

void Checkpointer::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

void Checkpointer::Finish() {
  if (!options_.dir.empty() && options_.final_on_stop) {
    uint64_t step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      step = last_cut_step_ + 1;
    }
    LOG(INFO) << "final checkpoint (step " << step << ", no worker positions)";
    auto c = CutLocked(step, /*with_positions=*/false,
                       /*final_checkpoint=*/true);
    if (!c.ok()) LOG(ERROR) << "final checkpoint: " << c.status();
  }
  WaitIdle();
}

StatusOr<proto::CheckpointReply> Checkpointer::Handle(
    const proto::CheckpointRequest& r, int64_t worker_id) {
  Reply reply;
  reply.set_every_steps(options_.every_steps);
  reply.set_every_secs(options_.every_secs);
  reply.set_server_instance(instance_);
  reply.set_server_shard(shard_->shard_id());
  switch (r.action()) {
    case proto::CheckpointRequest::INFO: {
      std::lock_guard<std::mutex> lock(mu_);
      if (restored_) {
        reply.set_restored(true);
        reply.set_restored_step(restored_manifest_.step());
        reply.set_restored_from(restored_from_);
        for (const auto& w : restored_manifest_.workers()) {
          if (w.worker_id() != r.worker_id()) continue;
          reply.set_epoch(w.epoch());
          reply.set_examples_consumed(w.examples_consumed());
        }
      }
      return reply;
    }
    case proto::CheckpointRequest::DUE: {
      if (worker_id < 0) {
        return InvalidArgument("DUE needs a worker's hello first");
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (options_.every_secs > 0 && due_.size() >= kMaxPendingSteps &&
          !due_.count(r.step())) {
        return ResourceExhausted("too many pending DUE steps");
      }
      bool due =
          options_.every_steps > 0 && r.step() % options_.every_steps == 0;
      if (options_.every_secs > 0) {
        // The first worker to ask about a step decides for all of them.
        auto [it, inserted] = due_.emplace(r.step(), false);
        if (inserted) {
          it->second = Clock::now() - last_cut_time_ >=
                       std::chrono::seconds(options_.every_secs);
        }
        due = due || it->second;
      }
      reply.set_due(due && !options_.dir.empty());
      return reply;
    }
    case proto::CheckpointRequest::POSITION: {
      if (worker_id < 0) {
        return InvalidArgument("POSITION needs a worker's hello first");
      }
      ck::proto::WorkerPosition p;
      p.set_worker_id(static_cast<uint32_t>(worker_id));
      p.set_step(r.step());
      p.set_epoch(r.epoch());
      p.set_examples_consumed(r.examples_consumed());
      // Wait until the previous checkpoint ended, so that every worker
      // gets the same account of it (the cut would wait for it anyway).
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock,
               [this] { return (queue_.empty() && !writing_) || stopping_; });
      if (stopping_) return Cancelled("the server is stopping");
      if (r.step() <= last_cut_step_ ||
          (positions_.size() >= kMaxPendingSteps &&
           !positions_.count(r.step()))) {
        return InvalidArgument("POSITION for step " + std::to_string(r.step()) +
                               ", which is not after the last cut (step " +
                               std::to_string(last_cut_step_) +
                               ") or too far ahead");
      }
      positions_[r.step()][p.worker_id()] = p;
      reply.set_previous_step(outcomes_.last_step);
      reply.set_previous_failed(outcomes_.last_failed);
      reply.set_previous_error(outcomes_.last_error);
      reply.set_consecutive_failures(outcomes_.consecutive_failures);
      reply.set_newest_complete_step(outcomes_.newest_complete_step);
      return reply;
    }
    case proto::CheckpointRequest::CUT: {
      // Only the worker that drives the cut may take one: an anonymous cut
      // would make shard 0 wait for parts no other shard writes.
      if (worker_id != 0) {
        return InvalidArgument(
            "CUT is worker 0's request (after its hello), not this "
            "connection's");
      }
      PS_ASSIGN_OR_RETURN(double pause, Cut(r.step(), true));
      reply.set_cut_pause_ms(pause);
      return reply;
    }
    case proto::CheckpointRequest::PART: {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = parts_.find(r.step());
      reply.set_part(it == parts_.end() ? Reply::NOT_CUT : it->second.state);
      if (it != parts_.end()) reply.set_part_error(it->second.error);
      return reply;
    }
    case proto::CheckpointRequest::RESTORE: {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = verdicts_.find(r.step());
      // Heard: the asker got this shard's verdict, not "still loading".
      if (it != verdicts_.end() && r.from_shard() < shard_->num_shards() &&
          r.from_shard() != shard_->shard_id() &&
          askers_.size() < kMaxPendingSteps) {
        askers_.insert({r.from_shard(), r.step()});
        cv_.notify_all();
      }
      if (it != verdicts_.end()) {
        reply.set_verdict(it->second.verdict());
        reply.set_verdict_error(it->second.verdict_error());
      }
      return reply;
    }
    default:
      return InvalidArgument("unknown checkpoint action " +
                             std::to_string(r.action()));
  }
}

}  // namespace ps::server
