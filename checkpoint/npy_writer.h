// NpyWriter: writes one NumPy .npy file (format 1.0: a 1-D or 2-D,
// C-order, little-endian float32 or uint64 array), which numpy.load and
// therefore PyTorch (torch.from_numpy) read without this project.
//
//   auto w = NpyWriter::Create("/out/emb.rows.npy", NpyType::kFloat32, 16);
//   (*w)->Append(rows, n);            // or WriteAt(row, data, n) by place
//   (*w)->Finish(n);                  // header, fsync, rename: now visible
//
// The rows are written to "<path>.tmp" behind a header of fixed size
// (kNpyHeaderBytes, room for any shape), whose shape Finish fills in, so the
// number of rows need not be known up front. Finish fsyncs the file and
// renames it over <path>: a reader sees a whole file or none. A writer
// destroyed before Finish removes its temporary file.
//
// Thread-safety: WriteAt may be called from several threads at once for
// disjoint rows; Append (buffered) and Finish from one thread, not mixed
// with concurrent WriteAt.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::checkpoint {

enum class NpyType { kFloat32, kUint64 };

// The bytes before the data: the magic, version, header length and the
// header dictionary padded with spaces. A multiple of 64, as NumPy aligns.
inline constexpr size_t kNpyHeaderBytes = 128;

// The whole header of an array of `rows` rows of `cols` items (cols 0: a 1-D
// array of `rows` items), kNpyHeaderBytes long.
std::string NpyHeader(NpyType type, uint64_t rows, uint64_t cols);

class NpyWriter {
 public:
  // Creates "<path>.tmp" (replacing a stale one). cols 0: a 1-D array.
  // kIOError naming the file.
  static StatusOr<std::unique_ptr<NpyWriter>> Create(std::string path,
                                                     NpyType type,
                                                     uint64_t cols);
  ~NpyWriter();
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;

  // `rows` rows from `data` at row `row` (positioned write; unwritten rows
  // read as zeros). kIOError naming the file (a full disk included).
  Status WriteAt(uint64_t row, const void* data, uint64_t rows);
  // `rows` rows from `data` after the rows appended before.
  Status Append(const void* data, uint64_t rows);
  // Writes the header for `rows` rows (the file is cut or extended to
  // them), fsyncs and renames the file into place.
  Status Finish(uint64_t rows);

  const std::string& path() const { return path_; }
  size_t row_bytes() const { return row_bytes_; }

 private:
  NpyWriter(std::string path, NpyType type, uint64_t cols, int fd);
  Status Flush();
  Status PWrite(const char* data, size_t n, uint64_t offset);

  const std::string path_, tmp_path_;
  const NpyType type_;
  const uint64_t cols_;
  const size_t row_bytes_;
  int fd_;
  uint64_t appended_rows_ = 0;  // in the file or the buffer
  std::vector<char> buffer_;    // appended rows not yet written
  bool finished_ = false;
};

}  // namespace ps::checkpoint
