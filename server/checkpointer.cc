#include "server/checkpointer.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "checkpoint/committer.h"
#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_writer.h"

namespace ps::server {
namespace {

namespace ck = ps::checkpoint;

int StateArraysOf(const std::vector<float>* state) {
  int n = 0;
  for (int k = 0; k < kernels::kMaxOptimizerStates; ++k) {
    if (!state[k].empty()) n = k + 1;
  }
  return n;
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
  return Status::OK();
}

Checkpointer::Checkpointer(CheckpointOptions options, Shard* shard)
    : options_(std::move(options)),
      shard_(shard),
      last_cut_time_(std::chrono::steady_clock::now()) {
  if (!options_.dir.empty()) writer_ = std::thread([this] { WriterLoop(); });
}

Checkpointer::~Checkpointer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (writer_.joinable()) writer_.join();
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
    const std::string done = ck::JoinPath(c.path, ck::ShardDoneName(k));
    std::error_code ec;
    if (!std::filesystem::exists(part, ec) &&
        !std::filesystem::exists(part + ".sst-tmp", ec) &&
        !std::filesystem::exists(done, ec)) {
      continue;
    }
    LOG(INFO) << "removing shard " << k << "'s part of the interrupted "
              << "checkpoint " << c.path;
    std::filesystem::remove_all(part, ec);
    std::filesystem::remove_all(part + ".sst-tmp", ec);
    std::filesystem::remove(done, ec);
  }
}

Status Checkpointer::Restore() {
  if (!options_.dir.empty()) RemoveInterruptedParts();
  if (options_.restore_from.empty()) return Status::OK();
  ck::RestoreTarget target;
  target.shard_id = shard_->shard_id();
  target.num_shards = shard_->num_shards();
  for (const auto& t : shard_->tables()) {
    ck::TableTarget tt;
    tt.spec = t->spec();
    if (t->exact()) {
      tt.state_arrays = t->exact_table()->state_arrays_;
    } else {
      tt.state_arrays = StateArraysOf(t->state_);
      tt.first_row = t->first_row();
      tt.rows = t->rows();
      tt.values = t->data();
      for (int k = 0; k < tt.state_arrays; ++k)
        tt.state[k] = t->state_[k].data();
    }
    target.tables.push_back(std::move(tt));
  }
  const auto start = std::chrono::steady_clock::now();
  StatusOr<ck::RestoreResult> r =
      options_.restore_from == "latest"
          ? ck::RestoreLatest(options_.dir,
                              {.fallback = options_.restore_fallback}, &target)
          : ck::RestoreShard(options_.restore_from, &target);
  if (!r.ok())
    return r.status().WithContext("--restore_from=" + options_.restore_from);
  for (const std::string& s : r->skipped) {
    LOG(WARNING) << "restore skipped " << s;
  }
  for (size_t i = 0; i < target.tables.size(); ++i) {
    TableShard* t = shard_->tables()[i].get();
    ck::TableTarget& tt = target.tables[i];
    if (!t->exact()) {
      std::lock_guard<std::mutex> lock(t->optimizer_mu_);
      t->optimizer_steps_ = tt.optimizer_steps;
      continue;
    }
    ExactTable* e = t->exact_table();
    std::lock_guard<std::mutex> lock(e->mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  restored_ = true;
  restored_manifest_ = r->manifest;
  restored_from_ = r->path;
  last_cut_step_ = r->manifest.step();
  LOG(INFO) << "restored shard " << shard_->shard_id() << " of "
            << shard_->num_shards() << " from " << r->path << " (step "
            << r->manifest.step() << ", " << r->manifest.num_shards()
            << " shards, chain of " << r->chain.size() << ", "
            << r->bytes_read / 1e6 << " MB read) in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                             start)
                   .count()
            << " s";
  return Status::OK();
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
      s.first_row = t->first_row();
      s.rows = t->rows();
      s.state_arrays = StateArraysOf(t->state_);
      // Nothing is applied during the cut (the workers wait in a barrier
      // after WaitApplied), but that order runs through the workers and
      // shared memory; holding the lock the apply threads of a stateful
      // optimizer take makes it visible here (and to TSan). SGD applies
      // without a lock and relies on the protocol alone.
      std::lock_guard<std::mutex> lock(t->optimizer_mu_);
      s.values.assign(t->data(), t->data() + t->rows() * t->dim());
      for (int k = 0; k < s.state_arrays; ++k) s.state[k] = t->state_[k];
      s.optimizer_steps = t->optimizer_steps_;
    }
    snap.tables.push_back(std::move(s));
  }
  return snap;
}

StatusOr<double> Checkpointer::Cut(uint64_t step, bool with_positions) {
  if (options_.dir.empty()) {
    return InvalidArgument("this server has no --checkpoint_dir");
  }
  std::lock_guard<std::mutex> cut(cut_mu_);
  {
    // The previous checkpoint must be on disk before the next copy (its
    // copy is the next one's baseline, and memory holds two at most).
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return queue_.empty() && !writing_; });
  }
  const auto start = std::chrono::steady_clock::now();
  Job job;
  job.snapshot = Copy();
  job.pause_ms = std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count();
  job.snapshot.step = step;
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
  last_cut_time_ = std::chrono::steady_clock::now();
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

void Checkpointer::Write(Job job) {
  const uint64_t step = job.snapshot.step;
  const std::string dir =
      ck::JoinPath(options_.dir, ck::CheckpointDirName(step));
  if (ck::ReadManifest(dir).ok()) {
    LOG(INFO) << "checkpoint " << dir << " already exists; not rewritten";
    return;
  }
  const bool full = !previous_ || written_ % options_.full_every == 0;
  ck::ShardWriteOptions wo;
  wo.kind = full ? ck::proto::FULL : ck::proto::INCREMENTAL;
  wo.threads = options_.write_threads;
  wo.cut_pause_ms = job.pause_ms;
  if (options_.test_hold_step != 0 && step == options_.test_hold_step) {
    wo.after_files = [this, step] {
      LOG(WARNING) << "test hold: checkpoint step " << step << " shard "
                   << shard_->shard_id()
                   << " half-written, holding (--test_hold_checkpoint_step)";
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(60), [this] { return stop_; });
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
  if (!entry.ok()) {
    LOG(ERROR) << "checkpoint step " << step << " shard " << shard_->shard_id()
               << " failed: " << entry.status()
               << " (the next checkpoint will be full)";
    previous_.reset();
    return;
  }
  previous_ = std::move(job.snapshot);
  ++written_;
  LOG(INFO) << "checkpoint step " << step << " shard " << shard_->shard_id()
            << ": " << (full ? "full" : "incremental of " + wo.parent) << ", "
            << entry->entries() << " entries, " << entry->bytes() / 1e6
            << " MB, cut pause " << job.pause_ms << " ms, write "
            << entry->write_ms() << " ms";
  if (shard_->shard_id() != 0) return;
  ck::CommitRequest c;
  c.checkpoint_dir = dir;
  c.step = step;
  c.num_shards = shard_->num_shards();
  c.tables.assign(shard_->config().table().begin(),
                  shard_->config().table().end());
  c.workers = job.positions;
  c.wait = std::chrono::seconds(options_.commit_wait_secs);
  auto m = ck::CommitCheckpoint(c);
  if (!m.ok()) {
    LOG(ERROR) << "checkpoint step " << step
               << " not committed: " << m.status();
    return;
  }
  LOG(INFO) << "checkpoint " << dir << " complete (" << m->total_bytes() / 1e6
            << " MB)";
  auto deleted = ck::ApplyRetention(options_.dir, options_.keep);
  if (!deleted.ok()) {
    LOG(WARNING) << "retention: " << deleted.status();
  } else {
    for (const auto& d : *deleted) LOG(INFO) << "retention deleted " << d;
  }
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
    auto c = Cut(step, /*with_positions=*/false);
    if (!c.ok()) LOG(ERROR) << "final checkpoint: " << c.status();
  }
  WaitIdle();
}

StatusOr<proto::CheckpointReply> Checkpointer::Handle(
    const proto::CheckpointRequest& r) {
  proto::CheckpointReply reply;
  reply.set_every_steps(options_.every_steps);
  reply.set_every_secs(options_.every_secs);
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
      std::lock_guard<std::mutex> lock(mu_);
      bool due =
          options_.every_steps > 0 && r.step() % options_.every_steps == 0;
      if (options_.every_secs > 0) {
        // The first worker to ask about a step decides for all of them.
        auto [it, inserted] = due_.emplace(r.step(), false);
        if (inserted) {
          it->second = std::chrono::steady_clock::now() - last_cut_time_ >=
                       std::chrono::seconds(options_.every_secs);
        }
        due = due || it->second;
      }
      reply.set_due(due && !options_.dir.empty());
      return reply;
    }
    case proto::CheckpointRequest::POSITION: {
      ck::proto::WorkerPosition p;
      p.set_worker_id(r.worker_id());
      p.set_step(r.step());
      p.set_epoch(r.epoch());
      p.set_examples_consumed(r.examples_consumed());
      std::lock_guard<std::mutex> lock(mu_);
      positions_[r.step()][r.worker_id()] = p;
      return reply;
    }
    case proto::CheckpointRequest::CUT: {
      PS_ASSIGN_OR_RETURN(double pause, Cut(r.step(), true));
      reply.set_cut_pause_ms(pause);
      return reply;
    }
    default:
      return InvalidArgument("unknown checkpoint action " +
                             std::to_string(r.action()));
  }
}

}  // namespace ps::server
