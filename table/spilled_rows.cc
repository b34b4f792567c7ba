#include "table/spilled_rows.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <queue>
#include <utility>

namespace ps::table {
namespace {

// A record: key, last update (8 bytes each), then the values and each
// state array (dim floats each). Records are 4-byte multiples, so the
// floats of a record in a buffer from new[] are aligned.
size_t RecordBytes(uint32_t dim, int state_arrays) {
  return 2 * sizeof(uint64_t) +
         size_t{dim} * sizeof(float) * (1 + static_cast<size_t>(state_arrays));
}

constexpr size_t kWriteBufferBytes = 4 << 20;
// Written back and dropped from the page cache in steps of this many bytes.
constexpr uint64_t kSettleBytes = 32 << 20;
// Read per run and refill: 64 runs (a table's partitions) hold 16 MiB.
constexpr size_t kReadBufferBytes = 256 << 10;

Status WriteAll(int fd, const std::byte* data, size_t n, uint64_t at,
                const std::string& where) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, static_cast<off_t>(at));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      return ErrnoStatus(StatusCode::kIOError, "writing " + where, errno);
    data += w;
    n -= static_cast<size_t>(w);
    at += static_cast<uint64_t>(w);
  }
  return Status::OK();
}

Status ReadAll(int fd, std::byte* data, size_t n, uint64_t at,
               const std::string& where) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, data, n, static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return ErrnoStatus(StatusCode::kIOError, "reading " + where, errno);
    if (r == 0) return IOError("reading " + where + ": the file is short");
    data += r;
    n -= static_cast<size_t>(r);
    at += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

// A file in `dir` without a name.
StatusOr<int> OpenUnnamed(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
    return ErrnoStatus(StatusCode::kIOError, "cannot make a file in " + dir,
                       errno);
  }
  // A file system without O_TMPFILE: a named file, unlinked at once.
  std::string path = dir + "/.ps-spill-XXXXXX";
  fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    return ErrnoStatus(StatusCode::kIOError, "cannot make a file in " + dir,
                       errno);
  }
  ::unlink(path.c_str());
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<RowSpill>> RowSpill::Create(const std::string& dir,
                                                     uint32_t dim,
                                                     int state_arrays) {
  if (dim == 0 || state_arrays < 0 ||
      state_arrays > kernels::kMaxOptimizerStates) {
    return InvalidArgument("a spill of rows of dim " + std::to_string(dim) +
                           " and " + std::to_string(state_arrays) +
                           " state arrays");
  }
  PS_ASSIGN_OR_RETURN(const int fd, OpenUnnamed(dir));
  return std::unique_ptr<RowSpill>(
      new RowSpill(fd, "the rows spilled into " + dir, dim, state_arrays));
}

RowSpill::RowSpill(int fd, std::string where, uint32_t dim, int state_arrays)
    : fd_(fd),
      where_(std::move(where)),
      dim_(dim),
      state_arrays_(state_arrays),
      record_bytes_(RecordBytes(dim, state_arrays)) {
  buffer_.reserve(std::max(kWriteBufferBytes, record_bytes_));
}

RowSpill::~RowSpill() {
  if (fd_ >= 0) ::close(fd_);
}

Status RowSpill::Append(uint64_t key, const float* values,
                        const float* const* state, uint64_t last_update) {
  if (fd_ < 0) return Internal("append to a finished spill");
  if (rows_ > run_begin_ && key <= last_key_) {
    return Internal("spilled keys out of order within a run");
  }
  if (buffer_.size() + record_bytes_ > buffer_.capacity()) {
    PS_RETURN_IF_ERROR(Flush());
  }
  const size_t at = buffer_.size();
  buffer_.resize(at + record_bytes_);
  std::byte* p = buffer_.data() + at;
  std::memcpy(p, &key, sizeof key);
  std::memcpy(p + 8, &last_update, sizeof last_update);
  const size_t row_bytes = size_t{dim_} * sizeof(float);
  std::memcpy(p + 16, values, row_bytes);
  for (int k = 0; k < state_arrays_; ++k) {
    std::memcpy(p + 16 + (1 + static_cast<size_t>(k)) * row_bytes, state[k],
                row_bytes);
  }
  last_key_ = key;
  ++rows_;
  return Status::OK();
}

void RowSpill::EndRun() {
  if (rows_ > run_begin_) run_ends_.push_back(rows_);
  run_begin_ = rows_;
}

Status RowSpill::Flush() {
  if (buffer_.empty()) return Status::OK();
  PS_RETURN_IF_ERROR(
      WriteAll(fd_, buffer_.data(), buffer_.size(), written_, where_));
  const uint64_t before = written_;
  written_ += buffer_.size();
  buffer_.clear();
  // Start writing back what was just written; wait for (and drop from the
  // cache) what lies a whole step behind.
  (void)::sync_file_range(fd_, static_cast<off_t>(before),
                          static_cast<off_t>(written_ - before),
                          SYNC_FILE_RANGE_WRITE);
  while (written_ - settled_ >= 2 * kSettleBytes) {
    if (::sync_file_range(fd_, static_cast<off_t>(settled_), kSettleBytes,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                              SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
      return ErrnoStatus(StatusCode::kIOError, "writing back " + where_, errno);
    }
    (void)::posix_fadvise(fd_, static_cast<off_t>(settled_), kSettleBytes,
                          POSIX_FADV_DONTNEED);
    settled_ += kSettleBytes;
  }
  return Status::OK();
}

StatusOr<std::shared_ptr<const SpilledRows>> RowSpill::Finish() {
  if (fd_ < 0) return Internal("a spill finished twice");
  EndRun();
  PS_RETURN_IF_ERROR(Flush());
  auto rows = std::shared_ptr<const SpilledRows>(
      new SpilledRows(std::exchange(fd_, -1), std::move(where_), dim_,
                      state_arrays_, std::move(run_ends_), rows_));
  buffer_ = {};
  return rows;
}

SpilledRows::SpilledRows(int fd, std::string where, uint32_t dim,
                         int state_arrays, std::vector<uint64_t> run_ends,
                         uint64_t rows)
    : fd_(fd),
      where_(std::move(where)),
      dim_(dim),
      state_arrays_(state_arrays),
      record_bytes_(RecordBytes(dim, state_arrays)),
      run_ends_(std::move(run_ends)),
      rows_(rows) {}

SpilledRows::~SpilledRows() { ::close(fd_); }

Status SpilledRows::PlaceAt(const std::string&,
                            const std::vector<std::string>&) const {
  return Internal("spilled rows are written, not placed");
}

Status SpilledRows::ForEach(const RowFn& fn) const {
  // One reader per run, each with a buffer of whole records; a heap of
  // (key, run) gives the next row.
  struct Run {
    uint64_t next = 0, end = 0;  // records
    std::vector<std::byte> buffer;
    uint64_t buffered_from = 0, buffered = 0;  // records in the buffer
  };
  const uint64_t per_buffer =
      std::max<uint64_t>(1, kReadBufferBytes / record_bytes_);
  std::vector<Run> runs(run_ends_.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    runs[r].next = r == 0 ? 0 : run_ends_[r - 1];
    runs[r].end = run_ends_[r];
  }
  // The record at runs[r].next, read into the buffer where needed.
  auto record = [&](size_t r) -> StatusOr<const std::byte*> {
    Run& run = runs[r];
    if (run.next >= run.buffered_from + run.buffered) {
      if (run.buffered > 0) {  // done with the last buffer's pages
        (void)::posix_fadvise(
            fd_, static_cast<off_t>(run.buffered_from * record_bytes_),
            static_cast<off_t>(run.buffered * record_bytes_),
            POSIX_FADV_DONTNEED);
      }
      run.buffered_from = run.next;
      run.buffered = std::min(per_buffer, run.end - run.next);
      run.buffer.resize(run.buffered * record_bytes_);
      PS_RETURN_IF_ERROR(ReadAll(fd_, run.buffer.data(), run.buffer.size(),
                                 run.buffered_from * record_bytes_, where_));
    }
    return run.buffer.data() + (run.next - run.buffered_from) * record_bytes_;
  };
  using Head = std::pair<uint64_t, size_t>;  // key, run
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  auto push_head = [&](size_t r) -> Status {
    if (runs[r].next >= runs[r].end) return Status::OK();
    PS_ASSIGN_OR_RETURN(const std::byte* p, record(r));
    uint64_t key;
    std::memcpy(&key, p, sizeof key);
    heads.emplace(key, r);
    return Status::OK();
  };
  for (size_t r = 0; r < runs.size(); ++r) PS_RETURN_IF_ERROR(push_head(r));
  const size_t row_bytes = size_t{dim_} * sizeof(float);
  const float* state[kernels::kMaxOptimizerStates] = {};
  uint64_t last_key = 0;
  uint64_t emitted = 0;
  while (!heads.empty()) {
    const auto [key, r] = heads.top();
    heads.pop();
    if (emitted > 0 && key <= last_key) {
      return Corruption(where_ + ": keys out of order or repeated");
    }
    last_key = key;
    ++emitted;
    PS_ASSIGN_OR_RETURN(const std::byte* p, record(r));
    uint64_t last_update;
    std::memcpy(&last_update, p + 8, sizeof last_update);
    const auto* values = reinterpret_cast<const float*>(p + 16);
    for (int k = 0; k < state_arrays_; ++k) {
      state[k] = reinterpret_cast<const float*>(
          p + 16 + (1 + static_cast<size_t>(k)) * row_bytes);
    }
    fn(key, values, state, last_update);
    ++runs[r].next;
    PS_RETURN_IF_ERROR(push_head(r));
  }
  return Status::OK();
}

}  // namespace ps::table
