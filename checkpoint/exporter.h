// ExportCheckpoint: writes a checkpoint's tables as plain NumPy files that
// any tool reads without this project (numpy.load; torch.from_numpy):
//
//   <out>/<table>.rows.npy   float32 [rows, dim]: the rows' values
//   <out>/<table>.keys.npy   uint64 [rows] (EXACT only): row i is keys[i]'s
//   <out>/tables.json        what the files are (written last)
//
// HASHED and DENSE tables: rows.npy holds every global row, in row order.
// A DENSE table's key is its row; a HASHED table maps id to row by
//   row = splitmix64(id ^ seed) % capacity, seed = the table's id
// (protocol/shard_map.h), which tables.json spells out, constants included.
// EXACT tables: the keys that have a row, shard by shard, ascending within a
// shard; keys.npy and rows.npy are in the same order. A key missing from
// keys.npy has no row in the checkpoint (a server would give it a fresh
// row from the table's initializer when pushed).
// Optimizer state and EXACT last-update steps are not exported: they serve
// training, which restores checkpoints instead.
//
// An incremental checkpoint is exported as it would be restored: its chain
// applied from the full base on, tombstones removing keys, read by a
// checkpoint/chain_reader.h (its memory: the changed rows of one shard's
// increments; bases stream to the files; every shard checked as a restore
// checks it).
//
// Files appear whole or not at all (each written to "<name>.tmp", fsynced,
// renamed); tables.json is renamed into place last, after every table's
// files, so a folder without it is an export that did not finish.
//
// Thread-safety: one call works alone on its output folder; several calls
// may read one checkpoint at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"
#include "protocol/ps.pb.h"

namespace ps::checkpoint {

inline constexpr char kExportIndexName[] = "tables.json";

struct ExportOptions {
  // Created if missing; must be empty (an export never replaces files).
  std::string out_dir;
  // Tables to export, by name; empty: every table of the checkpoint.
  std::vector<std::string> tables;
  // Threads reading a shard database whose rows go to their places
  // (HASHED/DENSE); 0: one per hardware thread, at most 8. EXACT bases are
  // read by one thread, in key order.
  int readers = 0;
};

struct ExportedTable {
  ps::proto::TableSpec spec;
  uint64_t rows = 0;      // rows written (EXACT: keys with a row)
  std::string rows_file;  // file names within the output folder
  std::string keys_file;  // EXACT only
};

struct ExportResult {
  proto::Manifest manifest;  // of the checkpoint exported
  std::vector<std::string> chain;
  std::vector<ExportedTable> tables;
  uint64_t bytes_read = 0;     // keys and values scanned
  uint64_t bytes_written = 0;  // of the .npy files
};

// kNotFound: no such checkpoint (or a missing link of its chain);
// kInvalidArgument: a table name it does not hold (the message lists those
// it has), an output folder that is not empty; kCorruption: a damaged
// checkpoint (named); kIOError: the output cannot be written (a full disk
// included). On an error no file of the export is left in the folder.
StatusOr<ExportResult> ExportCheckpoint(const std::string& checkpoint_path,
                                        const ExportOptions& options);

}  // namespace ps::checkpoint
