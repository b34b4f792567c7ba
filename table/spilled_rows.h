// SpilledRows: the rows an EXACT table with a disk tier held in memory at a
// checkpoint's cut, written to a file on the tier's disk instead of copied
// into memory (TableSnapshot::spilled). A table whose memory budget is most
// of the server's memory has no room for a second copy of its rows; a file
// costs the disk's write speed during the cut and no memory.
//
// RowSpill writes the file: runs of rows, keys ascending within each run
// (the table writes one run per partition, each sorted on its own).
// SpilledRows reads it back, the runs merged, keys ascending over all.
// The file has no name: it is unlinked when created (O_TMPFILE where the
// file system has it), so that a crash leaves nothing behind, and it goes
// with the last reference to the SpilledRows.
//
// Thread safety: a RowSpill is used by one thread. SpilledRows is
// immutable and thread-safe (each ForEach reads with its own buffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "table/table_snapshot.h"

namespace ps::table {

class SpilledRows;

class RowSpill {
 public:
  // A spill of rows of `dim` floats and `state_arrays` state arrays into a
  // file in `dir` (which must exist). kIOError naming `dir` when the file
  // cannot be made.
  static StatusOr<std::unique_ptr<RowSpill>> Create(const std::string& dir,
                                                    uint32_t dim,
                                                    int state_arrays);
  RowSpill(const RowSpill&) = delete;
  RowSpill& operator=(const RowSpill&) = delete;
  ~RowSpill();

  // Appends a row to the current run; its key must exceed the run's last.
  // kIOError when the disk refuses (full): the spill is of no use then.
  Status Append(uint64_t key, const float* values, const float* const* state,
                uint64_t last_update);
  // Ends the current run (an empty one is dropped).
  void EndRun();
  // Every row written out; the rows, readable until the last reference
  // goes. The spill takes no more rows afterwards (kInternal).
  StatusOr<std::shared_ptr<const SpilledRows>> Finish();

  uint64_t rows() const { return rows_; }

 private:
  RowSpill(int fd, std::string where, uint32_t dim, int state_arrays);
  // Writes the buffer out, and has the disk take what was written up to
  // two steps of kSettleBytes (32 MiB) before, dropped from the page cache:
  // a spill of gigabytes holds no more than that in dirty or cached pages
  // against the server's memory.
  Status Flush();

  int fd_;             // -1 once Finish handed it over
  std::string where_;  // for messages
  const uint32_t dim_;
  const int state_arrays_;
  const size_t record_bytes_;
  std::vector<std::byte> buffer_;
  uint64_t written_ = 0;  // bytes in the file
  uint64_t settled_ = 0;  // bytes written back and dropped from the cache
  uint64_t rows_ = 0;
  uint64_t last_key_ = 0;
  std::vector<uint64_t> run_ends_;  // record counts at each run's end
  uint64_t run_begin_ = 0;          // records before the current run
};

class SpilledRows final : public UncopiedRows {
 public:
  ~SpilledRows() override;
  SpilledRows(const SpilledRows&) = delete;
  SpilledRows& operator=(const SpilledRows&) = delete;

  // Every row, keys ascending. kIOError for a failed read; kCorruption
  // when a run's keys are not ascending (the file changed under us).
  Status ForEach(const RowFn& fn) const override;
  bool linked() const override { return false; }
  // kInternal: spilled rows are written by ForEach, never placed.
  Status PlaceAt(const std::string& dir,
                 const std::vector<std::string>& earlier) const override;

  uint64_t rows() const { return rows_; }
  uint64_t bytes() const { return rows_ * record_bytes_; }

 private:
  friend class RowSpill;
  SpilledRows(int fd, std::string where, uint32_t dim, int state_arrays,
              std::vector<uint64_t> run_ends, uint64_t rows);

  const int fd_;
  const std::string where_;
  const uint32_t dim_;
  const int state_arrays_;
  const size_t record_bytes_;
  const std::vector<uint64_t> run_ends_;  // in records
  const uint64_t rows_;
};

}  // namespace ps::table
