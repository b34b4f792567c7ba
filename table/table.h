// Table: one shard's part of a parameter table, whatever its kind and
// wherever its rows live. A server's shard (server/shard.h), its apply
// threads, its control handlers and its checkpointer hold tables through
// this interface only. Today's kinds:
//
//   ParamTable        HASHED and DENSE rows in host memory, at fixed places
//                     workers read one-sidedly (table/param_table.h)
//   DeviceParamTable  the same in a GPU's memory (table/device_param_table.h)
//   ExactTable        EXACT: a key -> row index, rows reached through the
//                     server (table/exact_table.h)
//
// Each keeps its rows, an OptimizerState (table/optimizer_state.h: the apply
// rule, the state arrays, the step count) and whatever finds a row.
//
// What it offers:
//   - access(): how workers read rows: one-sidedly from a region at fixed
//     offsets (first_row()/num_rows() say which rows), or through the
//     server (ReadKeys);
//   - applies: a packet decoded on the host (ApplyRows: rows local to the
//     shard), a packet as it arrived (ApplyPacket: a table that decodes
//     itself, on a device), or keyed gradients (ApplyKeys);
//   - checkpoints as rows: Snapshot copies them out; a restore is
//     PrepareRestore (the table says where the checkpoint reader writes:
//     its own memory where the rows sit at fixed places, else buffers) and
//     FinishRestore (the table loads what was read);
//   - counters and its memory.
// A method a kind has no use for returns kNotSupported saying so.
//
// How the next kinds plug in:
//   - an exact-key table whose index workers read one-sidedly: access()
//     becomes a region again (the index and rows registered); ApplyKeys
//     already comes from the inbox (keyed packets, server/apply_loop.h);
//     snapshot and restore stay these rows.
//   - a tiered table (cold rows on disk): access() says per key whether a
//     row is in memory (a worker that finds it is not asks the server,
//     whose ReadKeys brings it in); applies bring rows in first; its
//     checkpoints add immutable files the checkpoint links, besides rows.
//   - a read-only table of a serving replica: FinishRestore of each new
//     checkpoint, ReadKeys for lookups; the applies return kNotSupported.
//
// Thread-safety: applies and reads may run on any number of threads at
// once (each kind says how it orders them); Snapshot may run while applies
// do (it takes the locks applies take; a lock-free sum/sgd table relies on
// the caller's barrier); PrepareRestore / FinishRestore only while nothing
// else runs on the table.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include "kernels/sparse_accumulate.h"
#include "protocol/ps.pb.h"
#include "protocol/sparse_packet.h"
#include "table/table_counters.h"
#include "table/table_snapshot.h"

namespace ps::table {

// How workers read a table's rows.
enum class RowAccess : uint8_t {
  // At fixed offsets of a region workers read one-sidedly: row r of the
  // table at (r - first_row()) * dim floats.
  kRegion,
  // Through the server: ReadKeys.
  kThroughServer,
};

class Table {
 public:
  virtual ~Table() = default;

  const proto::TableSpec& spec() const { return spec_; }
  uint32_t id() const { return spec_.id(); }
  uint32_t dim() const { return spec_.dim(); }

  virtual RowAccess access() const = 0;
  // kRegion: the global rows [first_row(), first_row() + num_rows()) this
  // shard holds; 0 for the others.
  virtual uint64_t first_row() const { return 0; }
  virtual uint64_t num_rows() const { return 0; }

  // Applies a packet decoded on the host: rows local to the shard (each <
  // num_rows()) and their gradients (rows.size() * dim floats; scratch: it
  // may be scaled in place), of training step `step` (the packet's). `mode`
  // kAtomic when other threads may apply to this table at the same time.
  // kOutOfRange for a bad row (nothing applied then).
  virtual Status ApplyRows(uint64_t step, std::span<const uint32_t> rows,
                           std::span<float> grads,
                           kernels::AccumulateMode mode);
  // Whether the table decodes packets itself (ApplyPacket): a device table
  // does, on its GPU. Asked per packet, so cheap.
  virtual bool DecodesPackets() const { return false; }
  // Decodes `packet` itself (checked against `expect`, with the table's
  // rows and dim) and applies it; *header is the packet's header then.
  // kNotSupported: this table does not decode (the default), or not this
  // packet: decode it on the host and call ApplyRows. Otherwise the errors
  // of protocol::DecodeSparsePacket for a bad packet (nothing applied),
  // kInternal / kResourceExhausted for what failed in the table itself.
  virtual Status ApplyPacket(std::span<const uint8_t> packet,
                             const protocol::SparsePacketExpectations& expect,
                             protocol::SparsePacketHeader* header);
  // Keyed tables: applies keys.size() gradients (keys.size() * dim floats)
  // of training step `step`. kInvalidArgument for a size mismatch or a
  // non-finite value (nothing applied then).
  virtual Status ApplyKeys(uint64_t step, std::span<const uint64_t> keys,
                           std::span<const float> grads);
  // ApplyKeys for keys that come with their protocol::KeyHash, ascending,
  // as packets of hashes carry them (protocol::IsKeyHashes): hashes[i] is
  // KeyHash(keys[i]). A table that files keys by that hash then neither
  // hashes nor groups them again. By default, ApplyKeys.
  virtual Status ApplyHashedKeys(uint64_t step, std::span<const uint64_t> keys,
                                 std::span<const uint64_t> hashes,
                                 std::span<const float> grads);
  // Keyed tables: copies each key's row into `out` (keys.size() * dim
  // floats); a key without a row reads as zeros, present[i] false.
  virtual Status ReadKeys(std::span<const uint64_t> keys, std::span<float> out,
                          std::span<bool> present) const;

  // A copy of the rows, their optimizer state and the step count, replacing
  // what *out held (out->spec as given).
  virtual Status Snapshot(TableSnapshot* out) const = 0;
  // Points `target` (its spec set) at where the checkpoint reader puts
  // this table's rows, for FinishRestore to load.
  virtual Status PrepareRestore(TableTarget* target) = 0;
  // Loads what the reader put where PrepareRestore said, with its step
  // count; whatever the table held before is gone. kResourceExhausted when
  // the rows do not fit.
  virtual Status FinishRestore(TableTarget* target) = 0;

  virtual TableCounters counters() const { return {}; }
  // Bytes of rows and optimizer state in memory (a bound where rows come
  // and go).
  virtual uint64_t bytes() const = 0;
  // Where the rows live, for the server's start line: "32.0 MB", "32.0 MB
  // on cuda:0".
  virtual std::string Placement() const;

 protected:
  explicit Table(const proto::TableSpec& spec) : spec_(spec) {}
  // kNotSupported: "table 'emb' (exact) cannot <what>".
  Status Unsupported(const char* what) const;

 private:
  const proto::TableSpec spec_;
};

}  // namespace ps::table
