#include "checkpoint/shard_writer.h"

#include <rocksdb/db.h>
#include <rocksdb/sst_file_writer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "checkpoint/layout.h"
#include "checkpoint/rocksdb_options.h"
#include "checkpoint/row_codec.h"

namespace ps::checkpoint {
namespace {

// Entry i of a table in key order: order[i] indexes the snapshot's entries;
// kTombstone + j marks deleted[j].
constexpr uint64_t kTombstone = uint64_t{1} << 63;

struct TablePlan {
  const TableSnapshot* table;
  bool exact;
  size_t value_bytes;           // of one row's entry
  uint64_t run_rows;            // HASHED/DENSE: the most rows of an entry
  std::vector<uint64_t> order;  // empty: entries 0..n-1 are in key order
  uint64_t count;               // entries incl. tombstones
};

struct Chunk {
  size_t table;
  uint64_t begin, end;  // positions in the table's key order
  // The file to write; with `on_disk` (the rows a table's snapshot did not
  // copy, linked) the folder to place them in; with `merged` (the copied
  // entries and rows read back in one chunk: the rows on disk not linked,
  // or the rows in memory spilled) the prefix of the files to write.
  std::string file;
  bool on_disk = false;
  const UncopiedRows* merged = nullptr;
  std::vector<std::string> files;  // written
  uint64_t entries = 0;
  uint64_t checksum = 0;
  Status status;
};

Status CheckTable(const TableSnapshot& t) {
  const std::string where =
      "table '" + t.spec.name() + "' (id " + std::to_string(t.spec.id()) + ")";
  const uint64_t dim = t.dim();
  if (dim == 0) return InvalidArgument(where + ": dim 0");
  if (t.values.size() % dim != 0) {
    return InvalidArgument(where + ": values are not whole rows");
  }
  const uint64_t n = t.size();
  if (t.state_arrays < 0 || t.state_arrays > kernels::kMaxOptimizerStates) {
    return InvalidArgument(where + ": bad state array count");
  }
  for (int k = 0; k < t.state_arrays; ++k) {
    if (t.state[k].size() != t.values.size()) {
      return InvalidArgument(where + ": optimizer state " + std::to_string(k) +
                             " has " + std::to_string(t.state[k].size()) +
                             " floats for " + std::to_string(t.values.size()) +
                             " values");
    }
  }
  const bool exact = t.spec.kind() == ps::proto::EXACT;
  if (exact || !t.full) {
    if (t.ids.size() != n) {
      return InvalidArgument(where + ": " + std::to_string(t.ids.size()) +
                             " ids for " + std::to_string(n) + " rows");
    }
  } else if (t.ids.empty() && n != t.rows) {
    return InvalidArgument(where + ": a full snapshot of " +
                           std::to_string(t.rows) + " rows holds " +
                           std::to_string(n));
  }
  if (exact && t.last_update.size() != n) {
    return InvalidArgument(where + ": last_update is not per entry");
  }
  if (!exact && !t.deleted.empty()) {
    return InvalidArgument(where + ": only EXACT tables delete keys");
  }
  if (!exact && t.uncopied != nullptr) {
    return InvalidArgument(where + ": only EXACT tables keep rows on disk");
  }
  if (t.spilled != nullptr && (t.uncopied == nullptr || !t.uncopied->linked() ||
                               n != 0 || !t.deleted.empty())) {
    return InvalidArgument(where +
                           ": rows spilled beside copied ones or rows on "
                           "disk not linked");
  }
  return Status::OK();
}

TablePlan PlanTable(const TableSnapshot& t, uint64_t max_run_rows) {
  TablePlan p;
  p.table = &t;
  p.exact = t.spec.kind() == ps::proto::EXACT;
  p.value_bytes = ValueBytes(t.dim(), t.state_arrays, p.exact);
  p.run_rows = p.exact            ? 1
               : max_run_rows > 0 ? max_run_rows
                                  : RowsPerRun(t.dim(), t.state_arrays);
  const uint64_t n = t.size();
  p.count = n + t.deleted.size();
  if (!t.deleted.empty() || !std::is_sorted(t.ids.begin(), t.ids.end())) {
    p.order.resize(p.count);
    for (uint64_t i = 0; i < n; ++i) p.order[i] = i;
    for (uint64_t j = 0; j < t.deleted.size(); ++j) {
      p.order[n + j] = kTombstone | j;
    }
    auto id_of = [&t](uint64_t o) {
      return (o & kTombstone) ? t.deleted[o & ~kTombstone] : t.ids[o];
    };
    std::sort(p.order.begin(), p.order.end(),
              [&](uint64_t a, uint64_t b) { return id_of(a) < id_of(b); });
  }
  return p;
}

// The snapshot index of position `pos` in the table's key order.
uint64_t IndexAt(const TablePlan& plan, uint64_t pos) {
  return plan.order.empty() ? pos : plan.order[pos];
}

// HASHED/DENSE: how many rows from position `pos` (below `end`) form one run:
// consecutive rows, at most plan.run_rows.
uint64_t RunLength(const TablePlan& plan, uint64_t pos, uint64_t end) {
  const TableSnapshot& t = *plan.table;
  const uint64_t limit = std::min(end - pos, plan.run_rows);
  if (plan.order.empty() && t.ids.empty()) return limit;  // every row
  const uint64_t first = t.IdAt(IndexAt(plan, pos));
  uint64_t n = 1;
  while (n < limit && t.IdAt(IndexAt(plan, pos + n)) == first + n) ++n;
  return n;
}

// Fills `value` with the run of `rows` rows at position `pos`, array by
// array (checkpoint/row_codec.h).
void EncodeRun(const TablePlan& plan, uint64_t pos, uint64_t rows,
               std::string* value) {
  const TableSnapshot& t = *plan.table;
  const size_t row_bytes = size_t{t.dim()} * sizeof(float);
  value->resize(rows * RowBytes(t.dim(), t.state_arrays));
  char* p = value->data();
  for (int a = 0; a <= t.state_arrays; ++a) {
    const float* src = a == 0 ? t.values.data() : t.state[a - 1].data();
    if (plan.order.empty()) {  // snapshot indices pos.. are consecutive
      std::memcpy(p, src + pos * t.dim(), rows * row_bytes);
      p += rows * row_bytes;
      continue;
    }
    for (uint64_t i = 0; i < rows; ++i) {
      std::memcpy(p, src + plan.order[pos + i] * t.dim(), row_bytes);
      p += row_bytes;
    }
  }
}

// EXACT: fills `value` with the row at position `pos` (EncodeExactValue).
void EncodeExactRow(const TablePlan& plan, uint64_t pos, std::string* value) {
  const TableSnapshot& t = *plan.table;
  const uint64_t i = IndexAt(plan, pos);
  const float* state[kernels::kMaxOptimizerStates] = {};
  for (int a = 0; a < t.state_arrays; ++a) {
    state[a] = t.state[a].data() + i * t.dim();
  }
  EncodeExactValue(t.dim(), t.state_arrays, t.values.data() + i * t.dim(),
                   state, t.last_update[i], value);
}

void WriteChunk(const TablePlan& plan, const rocksdb::Options& options,
                Chunk* chunk) {
  const TableSnapshot& t = *plan.table;
  const uint32_t table_id = t.spec.id();
  rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), options);
  rocksdb::Status s = writer.Open(chunk->file);
  std::string value;
  char key[kKeyBytes];
  for (uint64_t pos = chunk->begin; s.ok() && pos < chunk->end;) {
    const uint64_t o = IndexAt(plan, pos);
    uint64_t id;
    std::string_view v;
    if (!plan.exact) {
      id = t.IdAt(o);
      const uint64_t rows = RunLength(plan, pos, chunk->end);
      EncodeRun(plan, pos, rows, &value);
      v = value;
      pos += rows;
    } else if (o & kTombstone) {
      id = t.deleted[o & ~kTombstone];
      v = std::string_view();
      ++pos;
    } else {
      id = t.IdAt(o);
      EncodeExactRow(plan, pos, &value);
      v = value;
      ++pos;
    }
    EncodeKey(table_id, id, key);
    s = writer.Put(rocksdb::Slice(key, kKeyBytes),
                   rocksdb::Slice(v.data(), v.size()));
    chunk->checksum += EntryChecksum(table_id, id, v);
    ++chunk->entries;
  }
  if (s.ok()) s = writer.Finish();  // fsyncs the file
  if (!s.ok()) {
    chunk->status = IOError("writing " + chunk->file + " (table '" +
                            t.spec.name() + "'): " + s.ToString());
    return;
  }
  chunk->files.push_back(chunk->file);
}

// The rows a table's snapshot did not copy (TableSnapshot::uncopied: an
// EXACT table's disk tier): their files placed in the folder chunk->file
// (hard links where the file system allows), then read once for the
// entries and checksum that the shard's manifest entry records, as if they
// had been written as EXACT values.
void PlaceRowsOnDisk(const TablePlan& plan,
                     const std::vector<std::string>& earlier, Chunk* chunk) {
  const TableSnapshot& t = *plan.table;
  const uint32_t table_id = t.spec.id();
  Status s = t.uncopied->PlaceAt(chunk->file, earlier);
  std::string value;
  if (s.ok()) {
    s = t.uncopied->ForEach([&](uint64_t id, const float* values,
                                const float* const* state,
                                uint64_t last_update) {
      EncodeExactValue(t.dim(), t.state_arrays, values, state, last_update,
                       &value);
      chunk->checksum += EntryChecksum(table_id, id, value);
      ++chunk->entries;
    });
  }
  if (!s.ok()) {
    chunk->status = s.WithContext("placing the rows on disk of table '" +
                                  t.spec.name() + "'");
  }
}

// The folders of the rows on disk that shard `shard` of the complete
// checkpoints beside `checkpoint_dir` hold for table `table_id`, newest
// first: where PlaceAt finds the copies an earlier checkpoint made (when
// the checkpoints lie on another file system than the disk tier).
std::vector<std::string> EarlierDiskTierFolders(
    const std::string& checkpoint_dir, uint32_t shard, uint32_t table_id) {
  std::vector<std::string> folders;
  const std::filesystem::path self(checkpoint_dir);
  auto all = ListCheckpoints(self.parent_path().string());
  if (!all.ok()) return folders;
  for (auto it = all->rbegin(); it != all->rend(); ++it) {
    if (!it->complete || it->name == self.filename().string()) continue;
    const std::string folder =
        JoinPath(it->path, ShardDiskTierName(shard, table_id));
    std::error_code ec;
    if (std::filesystem::is_directory(folder, ec)) folders.push_back(folder);
  }
  return folders;
}

// The copied entries (in key order) and the rows `chunk->merged` reads back
// (keys ascending; never a copied key: the rows on disk where their files
// could not be linked at the cut, or the rows in memory spilled at the cut)
// merged, in one pass, into files of about `target_file_bytes`, one after
// another. The same entries and checksum as every row copied would give.
void WriteMergedChunk(const TablePlan& plan, const rocksdb::Options& options,
                      uint64_t target_file_bytes, Chunk* chunk) {
  const TableSnapshot& t = *plan.table;
  const uint32_t table_id = t.spec.id();
  std::unique_ptr<rocksdb::SstFileWriter> writer;
  uint64_t file_bytes = 0;
  rocksdb::Status s;
  char key[kKeyBytes];
  auto put = [&](uint64_t id, std::string_view v) {
    if (!s.ok()) return;
    if (writer == nullptr || file_bytes >= target_file_bytes) {
      if (writer != nullptr && !(s = writer->Finish()).ok()) return;
      chunk->files.push_back(chunk->file + "-" +
                             std::to_string(chunk->files.size()) + ".sst");
      writer = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(),
                                                        options);
      file_bytes = 0;
      if (!(s = writer->Open(chunk->files.back())).ok()) return;
    }
    EncodeKey(table_id, id, key);
    s = writer->Put(rocksdb::Slice(key, kKeyBytes),
                    rocksdb::Slice(v.data(), v.size()));
    file_bytes += kKeyBytes + v.size();
    chunk->checksum += EntryChecksum(table_id, id, v);
    ++chunk->entries;
  };
  std::string value;
  uint64_t pos = 0;  // the next copied entry
  // The copied entries whose keys are below `below` (nullopt: all left).
  auto put_copied = [&](std::optional<uint64_t> below) {
    for (; pos < plan.count; ++pos) {
      const uint64_t o = IndexAt(plan, pos);
      const bool deleted = (o & kTombstone) != 0;
      const uint64_t id = deleted ? t.deleted[o & ~kTombstone] : t.IdAt(o);
      if (below.has_value() && id >= *below) return;
      if (!deleted) EncodeExactRow(plan, pos, &value);
      put(id, deleted ? std::string_view() : std::string_view(value));
    }
  };
  const Status scanned = chunk->merged->ForEach(
      [&](uint64_t id, const float* values, const float* const* state,
          uint64_t last_update) {
        put_copied(id);
        EncodeExactValue(t.dim(), t.state_arrays, values, state, last_update,
                         &value);
        put(id, value);
      });
  put_copied(std::nullopt);
  if (s.ok() && writer != nullptr) s = writer->Finish();
  if (!scanned.ok()) {
    chunk->status = scanned.WithContext("reading back the rows of table '" +
                                        t.spec.name() + "'");
  } else if (!s.ok()) {
    chunk->status = IOError("writing " + chunk->file + "-*.sst (table '" +
                            t.spec.name() + "'): " + s.ToString());
  }
}

// WriteShard's work once the checkpoint directory exists and no leftover of
// WriteShard's work once the checkpoint directory exists and no leftover of
// shard-<k> is in it. Leaves partial files behind on failure: WriteShard
// removes them.
StatusOr<proto::ShardEntry> WriteShardFiles(const std::string& checkpoint_dir,
                                            const ShardSnapshot& snapshot,
                                            const ShardWriteOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  namespace fs = std::filesystem;
  const std::string shard_name = ShardDirName(snapshot.shard_id);
  const std::string shard_dir = JoinPath(checkpoint_dir, shard_name);
  const std::string sst_dir = shard_dir + ".sst-tmp";
  std::error_code ec;
  fs::create_directories(sst_dir, ec);
  if (ec) return IOError("cannot create " + sst_dir + ": " + ec.message());

  std::vector<TablePlan> plans;
  for (const TableSnapshot& t : snapshot.tables) {
    Status s = CheckTable(t);
    if (!s.ok()) return s;
  }
  // Key order across tables is table id order.
  std::vector<const TableSnapshot*> sorted;
  for (const TableSnapshot& t : snapshot.tables) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](auto* a, auto* b) { return a->spec.id() < b->spec.id(); });
  for (const TableSnapshot* t : sorted) {
    plans.push_back(PlanTable(*t, options.max_rows_per_entry));
  }

  std::vector<Chunk> chunks;
  for (size_t ti = 0; ti < plans.size(); ++ti) {
    // Whole runs per file: a run never spans two files.
    const uint64_t run = plans[ti].run_rows;
    const TableSnapshot& t = *plans[ti].table;
    const UncopiedRows* merged =
        t.spilled != nullptr                             ? t.spilled.get()
        : t.uncopied != nullptr && !t.uncopied->linked() ? t.uncopied.get()
                                                         : nullptr;
    if (t.uncopied != nullptr && t.uncopied->linked()) {
      Chunk c;
      c.table = ti;
      c.on_disk = true;
      c.file = JoinPath(checkpoint_dir,
                        ShardDiskTierName(snapshot.shard_id, t.spec.id()));
      chunks.push_back(std::move(c));
    }
    if (merged != nullptr) {
      Chunk c;
      c.table = ti;
      c.begin = 0;
      c.end = plans[ti].count;
      c.merged = merged;
      c.file = JoinPath(sst_dir, std::to_string(chunks.size()));
      chunks.push_back(std::move(c));
      continue;
    }
    const uint64_t per_file =
        std::max<uint64_t>(1, options.target_file_bytes /
                                  (plans[ti].value_bytes + kKeyBytes) / run) *
        run;
    for (uint64_t b = 0; b < plans[ti].count; b += per_file) {
      Chunk c;
      c.table = ti;
      c.begin = b;
      c.end = std::min(plans[ti].count, b + per_file);
      c.file = JoinPath(sst_dir, std::to_string(chunks.size()) + ".sst");
      chunks.push_back(std::move(c));
    }
  }

  const rocksdb::Options db_options = CheckpointDbOptions();
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < chunks.size();) {
      if (chunks[i].on_disk) {
        PlaceRowsOnDisk(
            plans[chunks[i].table],
            EarlierDiskTierFolders(checkpoint_dir, snapshot.shard_id,
                                   plans[chunks[i].table].table->spec.id()),
            &chunks[i]);
      } else if (chunks[i].merged != nullptr) {
        WriteMergedChunk(plans[chunks[i].table], db_options,
                         options.target_file_bytes, &chunks[i]);
      } else {
        WriteChunk(plans[chunks[i].table], db_options, &chunks[i]);
      }
    }
  };
  const int threads =
      std::clamp<int>(options.threads, 1, std::max<size_t>(chunks.size(), 1));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (options.after_files) options.after_files();

  proto::ShardEntry entry;
  entry.set_shard_id(snapshot.shard_id);
  entry.set_path(shard_name);
  entry.set_kind(options.kind);
  entry.set_parent(options.parent);
  entry.set_cut_pause_ms(options.cut_pause_ms);
  uint64_t checksum = 0, entries = 0, linked_bytes = 0;
  std::vector<std::string> files;
  std::vector<uint64_t> table_entries(plans.size(), 0);
  std::vector<std::string> disk_tier_paths(plans.size());
  for (const Chunk& c : chunks) {
    if (!c.status.ok()) return c.status;
    checksum += c.checksum;
    entries += c.entries;
    table_entries[c.table] += c.entries;
    files.insert(files.end(), c.files.begin(), c.files.end());
    if (c.on_disk) {
      disk_tier_paths[c.table] =
          std::filesystem::path(c.file).filename().string();
      linked_bytes += BytesOnDisk(c.file);
    }
  }
  for (size_t ti = 0; ti < plans.size(); ++ti) {
    const TablePlan& p = plans[ti];
    proto::ShardTableEntry* te = entry.add_tables();
    te->set_table_id(p.table->spec.id());
    te->set_disk_tier_path(disk_tier_paths[ti]);
    if (p.exact) te->set_clock_seconds(p.table->clock_s);
    te->set_full(p.table->full);
    te->set_entries(table_entries[ti]);
    if (!p.exact) te->set_rows_per_entry(static_cast<uint32_t>(p.run_rows));
    te->set_optimizer_steps(p.table->optimizer_steps);
    te->set_state_arrays(static_cast<uint32_t>(p.table->state_arrays));
  }

  rocksdb::Options open = db_options;
  open.create_if_missing = true;
  open.error_if_exists = true;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(open, shard_dir, &raw);
  if (!s.ok())
    return IOError("cannot create " + shard_dir + ": " + s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  if (!files.empty()) {
    rocksdb::IngestExternalFileOptions ingest;
    ingest.move_files = true;
    s = db->IngestExternalFile(files, ingest);
    if (!s.ok()) {
      return IOError("ingesting into " + shard_dir + ": " + s.ToString());
    }
  }
  s = db->Close();
  db.reset();
  if (!s.ok()) return IOError("closing " + shard_dir + ": " + s.ToString());
  fs::remove_all(sst_dir, ec);
  PS_RETURN_IF_ERROR(SyncDirectory(shard_dir));

  entry.set_entries(entries);
  entry.set_checksum(checksum);
  entry.set_bytes(BytesOnDisk(shard_dir) + linked_bytes);
  entry.set_linked_bytes(linked_bytes);
  entry.set_write_ms(std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - started)
                         .count());
  std::string payload;
  entry.SerializeToString(&payload);
  PS_RETURN_IF_ERROR(WriteFramedFile(
      JoinPath(checkpoint_dir, ShardDoneName(snapshot.shard_id)), payload));
  return entry;
}

}  // namespace

Status RemoveShardPart(const std::string& checkpoint_dir, uint32_t shard) {
  const std::string shard_dir = JoinPath(checkpoint_dir, ShardDirName(shard));
  const std::string done = JoinPath(checkpoint_dir, ShardDoneName(shard));
  // The .done first: while the database is half deleted, nothing may claim
  // that the shard is written.
  std::vector<std::string> paths = {done, done + ".tmp",
                                    shard_dir + ".sst-tmp"};
  // Its tables' rows on disk ("shard-3.disk-7"), whichever tables.
  const std::string disk_prefix = ShardDirName(shard) + ".disk-";
  std::error_code ec;
  std::filesystem::directory_iterator it(checkpoint_dir, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().rfind(disk_prefix, 0) == 0) {
      paths.push_back(it->path().string());
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return IOError("cannot list " + checkpoint_dir + ": " + ec.message());
  }
  paths.push_back(shard_dir);
  for (const std::string& path : paths) {
    PS_RETURN_IF_ERROR(RemoveTree(path));
  }
  return Status::OK();
}

StatusOr<proto::ShardEntry> WriteShard(const std::string& checkpoint_dir,
                                       const ShardSnapshot& snapshot,
                                       const ShardWriteOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(checkpoint_dir, ec);
  if (ec) {
    return IOError("cannot create " + checkpoint_dir + ": " + ec.message());
  }
  // A leftover of an attempt that was interrupted (never committed).
  PS_RETURN_IF_ERROR(RemoveShardPart(checkpoint_dir, snapshot.shard_id)
                         .WithContext("removing an earlier attempt"));
  StatusOr<proto::ShardEntry> entry =
      WriteShardFiles(checkpoint_dir, snapshot, options);
  if (entry.ok()) return entry;
  // A failed write (a full disk, most often) leaves nothing behind: partial
  // files would hold on to the space a retry or other shards need, and a
  // stray .done would let the commit count this shard as written.
  Status removed = RemoveShardPart(checkpoint_dir, snapshot.shard_id);
  if (!removed.ok()) {
    return Status(
        entry.status().code(),
        entry.status().message() +
            "; removing the partial shard also failed: " + removed.message());
  }
  return entry.status();
}

}  // namespace ps::checkpoint
