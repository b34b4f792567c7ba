#include "server/apply_loop.h"

#include <glog/logging.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "protocol/inbox_ring.h"
#include "protocol/inbox_slot.h"
#include "protocol/lookup_packet.h"
#include "protocol/sparse_packet.h"
#include "server/idle_spin.h"

namespace ps::server {
namespace {

// Packets taken from one inbox before looking at the next, so one busy
// worker cannot starve the others sharing a thread.
constexpr uint32_t kBudgetPerInbox = 8;

// How long a lone idle apply thread sleeps between looks at its stop flag
// when no packet rings: what StopAndDrain may wait.
constexpr uint32_t kLoneThreadWaitUs = 20'000;

}  // namespace

ApplyLoop::ApplyLoop(Shard* shard, Inboxes* inboxes, ServerStats* stats,
                     ApplyOptions options)
    : shard_(shard),
      inboxes_(inboxes),
      stats_(stats),
      options_(options),
      threads_(std::clamp<uint32_t>(options.threads, 1, inboxes->workers())),
      // One thread is the only writer of the rows: plain adds suffice.
      mode_(threads_ == 1 ? kernels::AccumulateMode::kExclusive
                          : kernels::AccumulateMode::kAtomic),
      cursors_(new InboxCursor[inboxes->workers()]) {}

ApplyLoop::~ApplyLoop() { StopAndDrain(); }

void ApplyLoop::Start() {
  stop_.store(false, std::memory_order_release);
  for (uint32_t t = 0; t < threads_; ++t) {
    running_.emplace_back([this, t] { Run(t); });
  }
}

void ApplyLoop::StopAndDrain() {
  stop_.store(true, std::memory_order_release);
  for (auto& t : running_) t.join();
  running_.clear();
}

uint64_t ApplyLoop::DrainOnce() {
  Scratch scratch;
  uint64_t total = 0;
  for (;;) {
    uint64_t round = 0;
    for (uint32_t w = 0; w < inboxes_->workers(); ++w) {
      round += Consume(w, UINT32_MAX, &scratch);
    }
    if (round == 0) return total;
    total += round;
  }
}

void ApplyLoop::Prepare(Scratch* scratch) const {
  const size_t max_packet = protocol::MaxPacketBytes(inboxes_->slot_bytes());
  scratch->rows.resize(max_packet);
  scratch->values.resize(max_packet);
}

void ApplyLoop::Run(uint32_t thread_index) {
  Scratch scratch;
  Prepare(&scratch);
  std::vector<uint32_t> mine;
  for (uint32_t w = thread_index; w < inboxes_->workers(); w += threads_) {
    mine.push_back(w);
  }
  using Clock = std::chrono::steady_clock;
  const IdlePolicy& idle = options_.idle;
  IdleSpin spin{std::chrono::microseconds(idle.spin_us)};
  Clock::time_point idle_since{};
  // The last moment this thread was awake and had found nothing: about when
  // the packet that ends the idle period came (or woke it).
  Clock::time_point looked{};
  bool idle_now = false;
  uint32_t sleep_us = idle.sleep_min_us;
  for (;;) {
    // Read the flag before polling: a stop seen here is followed by at least
    // one full pass, so every packet complete at StopAndDrain is applied.
    const bool stopping = stop_.load(std::memory_order_acquire);
    // Before the poll: a packet whose ring is dropped here is visible to it.
    inboxes_->ForgetRings();
    uint64_t progress = 0;
    for (uint32_t w : mine) progress += Consume(w, kBudgetPerInbox, &scratch);
    if (progress > 0) {
      if (idle_now) spin.IdleEnded(looked - idle_since);
      idle_now = false;
      continue;
    }
    if (stopping) return;
    const Clock::time_point now = Clock::now();
    looked = now;
    if (!idle_now) {
      idle_now = true;
      idle_since = now;
      sleep_us = std::max<uint32_t>(idle.sleep_min_us, 1);
    }
    if (idle.sleep_max_us == 0 || now - idle_since < spin.window()) {
      _mm_pause();
      continue;
    }
    // One thread hears every ring, so it sleeps until one (or a stop's
    // short timeout); several wake on rings that may be another's inbox,
    // so each also looks again after its sleep, as the policy says.
    inboxes_->WaitForRing(threads_ == 1
                              ? std::chrono::microseconds(kLoneThreadWaitUs)
                              : std::chrono::microseconds(sleep_us));
    looked = Clock::now();
    sleep_us = std::min(sleep_us * 2, std::max(idle.sleep_max_us, 1u));
  }
}

uint32_t ApplyLoop::Consume(uint32_t worker, uint32_t budget,
                            Scratch* scratch) {
  if (scratch->rows.empty()) Prepare(scratch);
  uint64_t& head = cursors_[worker].head;
  uint32_t consumed = 0;
  std::chrono::steady_clock::time_point busy_since{};
  while (consumed < budget) {
    const uint8_t* slot = inboxes_->Slot(worker, head + 1);
    const protocol::InboxSlotHeader slot_header =
        protocol::InboxSlotHeader::Read(slot, head + 1);
    if (slot_header.sequence != head + 1) break;
    if (consumed == 0) busy_since = std::chrono::steady_clock::now();
    uint64_t rows = 0;
    RejectReason reason = RejectReason::kSlot;
    bool lookup = false;
    Status s = ApplyPacket(worker, slot, slot_header, scratch, &rows, &reason,
                           &lookup);
    if (s.ok()) {
      if (!lookup) stats_->PacketApplied(worker, rows, slot_header.length);
    } else if (stats_->PacketRejected(worker, reason)) {
      LOG(WARNING) << "rejected packet " << head + 1 << " from "
                   << WorkerName(worker) << ": " << s.ToString()
                   << " (further rejected packets of " << WorkerName(worker)
                   << " are counted in stats, not logged)";
    }
    ++head;
    ++consumed;
    inboxes_->PublishHead(worker, head);
  }
  if (consumed > 0) {
    const uint64_t ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now() - busy_since)
            .count());
    std::atomic<uint64_t>& busy = cursors_[worker].busy_ns;
    busy.store(busy.load(std::memory_order_relaxed) + ns,
               std::memory_order_relaxed);
  }
  return consumed;
}

Status ApplyLoop::ApplyKeyedPacket(
    std::span<const uint8_t> packet, const protocol::SparsePacketHeader& header,
    const protocol::SparsePacketExpectations& expect, TableShard& table,
    Scratch* scratch, uint64_t* rows_applied, RejectReason* reason) {
  // Sized on the first keyed packet: a server without EXACT tables needs
  // no key buffer.
  if (scratch->keys.size() < scratch->rows.size()) {
    scratch->keys.resize(scratch->rows.size());
    scratch->hashes.resize(scratch->rows.size());
  }
  // Keys sent as their hashes keep them: the table files keys by them.
  const bool hashed = protocol::IsKeyHashes(header.meta.index_encoding);
  PS_RETURN_IF_ERROR(protocol::DecodeKeyedPacket(
      packet, header, expect, scratch->keys, scratch->values,
      hashed ? std::span<uint64_t>(scratch->hashes) : std::span<uint64_t>()));
  const std::span<const uint64_t> keys(scratch->keys.data(), header.row_count);
  PS_RETURN_IF_ERROR(shard_->CheckKeysAreMine(table.spec(), keys));
  *reason = RejectReason::kApply;
  const std::span<const float> grads(scratch->values.data(),
                                     keys.size() * table.dim());
  Status s =
      hashed
          ? table.table().ApplyHashedKeys(
                header.meta.step, keys,
                std::span<const uint64_t>(scratch->hashes.data(), keys.size()),
                grads)
          : table.table().ApplyKeys(header.meta.step, keys, grads);
  if (!s.ok()) return s.WithContext("table " + table.spec().name());
  table.CountApplied(keys.size());
  *rows_applied = keys.size();
  return Status::OK();
}

double ApplyLoop::BusySeconds(uint32_t thread) const {
  uint64_t ns = 0;
  for (uint32_t w = thread; w < inboxes_->workers(); w += threads_) {
    ns += cursors_[w].busy_ns.load(std::memory_order_relaxed);
  }
  return static_cast<double>(ns) * 1e-9;
}

Status ApplyLoop::AnswerLookup(uint32_t worker, std::span<const uint8_t> packet,
                               Scratch* scratch, RejectReason* reason) {
  xfer::MemoryRegion* reply = inboxes_->reply_region(worker);
  if (reply == nullptr) {
    *reason = RejectReason::kTable;
    return InvalidArgument(
        "lookup packet, but this server has no table that answers lookups "
        "(no EXACT table)");
  }
  // A copy that only this thread writes: the slot stays writable by its
  // worker until the head passes it.
  scratch->packet.assign(packet.begin(), packet.end());
  uint8_t* region = static_cast<uint8_t*>(reply->data());
  Status s =
      ReadLookup(scratch->packet, region, reply->size(), scratch, reason);
  const uint64_t request = protocol::UncheckedLookupRequest(scratch->packet);
  if (!s.ok() && request != 0) protocol::WriteLookupRefusal(region, request, s);
  return s;
}

Status ApplyLoop::ReadLookup(std::span<const uint8_t> packet, uint8_t* reply,
                             uint64_t reply_bytes, Scratch* scratch,
                             RejectReason* reason) {
  *reason = RejectReason::kHeader;
  PS_ASSIGN_OR_RETURN(protocol::LookupRequest lookup,
                      protocol::ParseLookupPacket(packet, shard_->shard_id()));
  *reason = RejectReason::kTable;
  TableShard* table = shard_->Find(lookup.meta.table_id);
  if (table == nullptr) {
    return NotFound("lookup in unknown table id " +
                    std::to_string(lookup.meta.table_id));
  }
  if (table->table().access() != table::RowAccess::kThroughServer) {
    return InvalidArgument("lookup in table " + table->spec().name() +
                           ": only EXACT tables answer lookups (workers read "
                           "the other kinds' rows themselves)");
  }
  *reason = RejectReason::kPayload;
  const size_t n = lookup.keys.size();
  const uint64_t row_bytes = uint64_t{table->dim()} * sizeof(float);
  if (lookup.reply_offset > reply_bytes ||
      protocol::LookupReplySpan(n, row_bytes) >
          reply_bytes - lookup.reply_offset) {
    return OutOfRange("lookup of " + std::to_string(n) + " rows of " +
                      std::to_string(row_bytes) + " bytes at reply offset " +
                      std::to_string(lookup.reply_offset) +
                      " runs past the reply region's " +
                      std::to_string(reply_bytes) + " bytes");
  }
  PS_RETURN_IF_ERROR(shard_->CheckKeysAreMine(table->spec(), lookup.keys));
  if (scratch->present_size < n) {
    scratch->present = std::make_unique<bool[]>(n);
    scratch->present_size = n;
  }
  *reason = RejectReason::kApply;
  float* rows = reinterpret_cast<float*>(reply + lookup.reply_offset);
  Status s = table->table().ReadKeys(
      lookup.keys, std::span<float>(rows, n * table->dim()),
      std::span<bool>(scratch->present.get(), n));
  if (!s.ok()) return s.WithContext("table " + table->spec().name());
  protocol::WriteLookupAnswered(reply, lookup.request);
  stats_->LookupAnswered(n);
  return Status::OK();
}

Status ApplyLoop::ApplyPacket(uint32_t worker, const uint8_t* slot,
                              const protocol::InboxSlotHeader& slot_header,
                              Scratch* scratch, uint64_t* rows_applied,
                              RejectReason* reason, bool* lookup) {
  *reason = RejectReason::kSlot;
  PS_RETURN_IF_ERROR(slot_header.Validate(inboxes_->slot_bytes()));
  const std::span<const uint8_t> packet = slot_header.Packet(slot);
  if (protocol::IsLookupPacket(packet)) {
    *lookup = true;
    return AnswerLookup(worker, packet, scratch, reason);
  }
  *reason = RejectReason::kHeader;

  protocol::SparsePacketExpectations expect;
  expect.table_rows = uint64_t{UINT32_MAX} + 1;
  expect.shard_id = shard_->shard_id();
  expect.index = protocol::PacketIndex::kAny;  // the table says which below
  auto header = protocol::ParseSparsePacketHeader(packet, expect);
  if (!header.ok()) return header.status();
  const uint32_t table_id = header->meta.table_id;
  *reason = RejectReason::kTable;
  TableShard* table = shard_->Find(table_id);
  if (table == nullptr) {
    return NotFound("unknown table id " + std::to_string(table_id));
  }
  // A table whose rows sit at fixed places takes packets of rows; one that
  // finds a key's row itself (EXACT) takes keyed packets.
  const bool keyed = table->table().access() != table::RowAccess::kRegion;
  expect.index =
      keyed ? protocol::PacketIndex::kKeys : protocol::PacketIndex::kRows;
  expect.table_rows = table->rows();
  expect.row_dim = table->dim();
  expect.table_id = table_id;
  expect.max_row_count = static_cast<uint32_t>(scratch->rows.size());
  if (protocol::IsKeyed(header->meta.index_encoding) != keyed) {
    return InvalidArgument(
        std::string(keyed ? "packet of rows" : "keyed packet") + " for table " +
        table->spec().name() + " (id " + std::to_string(table_id) +
        "): an EXACT table takes keyed packets, the other kinds packets of "
        "rows");
  }
  *reason = RejectReason::kPayload;
  if (keyed)
    return ApplyKeyedPacket(packet, *header, expect, *table, scratch,
                            rows_applied, reason);
  if (table->table().DecodesPackets()) {
    // A table that decodes packets itself (a device table: from its own copy
    // of the packet, as the slot stays writable by its worker).
    protocol::SparsePacketHeader applied;
    Status s = table->table().ApplyPacket(packet, expect, &applied);
    if (s.ok()) {
      table->CountApplied(applied.row_count);
      *rows_applied = applied.row_count;
      return Status::OK();
    }
    // What the device itself failed at (not the packet) counts as an apply
    // error, as a failed Apply does on the host decode path.
    if (s.code() == StatusCode::kInternal ||
        s.code() == StatusCode::kResourceExhausted) {
      *reason = RejectReason::kApply;
      return s.WithContext("table " + table->spec().name());
    }
    // A table that does not decode, or not this packet: the host decodes.
    if (s.code() != StatusCode::kNotSupported) return s;
  }
  // The header parsed above, checked against the table, not parsed again.
  PS_RETURN_IF_ERROR(protocol::DecodeSparsePacket(
      packet, *header, expect, scratch->rows, scratch->values));
  const size_t n = header->row_count;
  *reason = RejectReason::kApply;
  Status s = table->table().ApplyRows(
      header->meta.step, std::span<const uint32_t>(scratch->rows.data(), n),
      std::span<float>(scratch->values.data(), n * table->dim()), mode_);
  if (!s.ok()) return s.WithContext("table " + table->spec().name());
  table->CountApplied(n);
  *rows_applied = n;
  return Status::OK();
}

}  // namespace ps::server
