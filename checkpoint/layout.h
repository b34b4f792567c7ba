// Where a checkpoint lives on disk, and how its small files are written so
// that a reader sees a whole file or none.
//
//   <root>/ckpt-000000000120/shard-0/        RocksDB of shard 0 at step 120
//   <root>/ckpt-000000000120/shard-0.done    its ShardEntry (framed)
//   <root>/ckpt-000000000120/shard-0.disk-7/ table 7's rows on disk, linked
//   <root>/ckpt-000000000120/MANIFEST        the Manifest (framed), LAST
//
// Framed file: "PSCK" magic, u32 frame version (kFrameVersion), u64
// payload length, the payload (a serialized protobuf), u64 XXH3-64 of the
// payload; all little endian. Written to "<name>.tmp", fsynced, renamed over
// <name>, and the directory fsynced: the rename is the commit point.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"

namespace ps::checkpoint {

// The framed file layout below (magic, version, length, payload, checksum).
inline constexpr uint32_t kFrameVersion = 1;
// The checkpoint format a Manifest records (format_version): what this
// program writes, and the oldest it still reads. 2: HASHED/DENSE entries hold
// runs of rows (checkpoint/row_codec.h); a program that reads only 1 refuses
// such a checkpoint by its version instead of misreading its values. 3: an
// EXACT table's rows on disk may lie in a database of their own
// (ShardTableEntry.disk_tier_path), which a program that reads only 2 would
// miss.
inline constexpr uint32_t kFormatVersion = 3;
inline constexpr uint32_t kOldestFormatVersion = 1;
inline constexpr char kManifestName[] = "MANIFEST";

// "ckpt-000000000120".
std::string CheckpointDirName(uint64_t step);
// Parses a directory name made by CheckpointDirName; false otherwise.
bool ParseCheckpointDirName(const std::string& name, uint64_t* step);
std::string ShardDirName(uint32_t shard);   // "shard-3"
std::string ShardDoneName(uint32_t shard);  // "shard-3.done"
// "shard-3.disk-7": table 7's rows on disk (ShardTableEntry.disk_tier_path).
std::string ShardDiskTierName(uint32_t shard, uint32_t table_id);
std::string JoinPath(const std::string& a, const std::string& b);

// Writes `payload` framed, atomically (temp file + fsync + rename + fsync of
// the directory). kIOError naming the path.
Status WriteFramedFile(const std::string& path, const std::string& payload);
// Writes `contents` to "<path>.tmp", fsyncs it, renames it over `path` and
// fsyncs the directory: a reader sees the old file, or none, or the whole
// new one. kIOError naming the file.
Status WriteFileAtomically(const std::string& path,
                           const std::string& contents);
// Reads a framed file. kNotFound when missing; kCorruption naming the path
// and what is wrong (magic, version, length, checksum).
StatusOr<std::string> ReadFramedFile(const std::string& path);

Status WriteManifest(const std::string& checkpoint_dir,
                     const proto::Manifest& m);
// kNotFound: no MANIFEST (an interrupted checkpoint); kCorruption: named.
StatusOr<proto::Manifest> ReadManifest(const std::string& checkpoint_dir);

// fsync of a directory (after creating or renaming entries in it).
Status SyncDirectory(const std::string& dir);
// Bytes of every regular file under `path` (recursively).
uint64_t BytesOnDisk(const std::string& path);

// Deletes `path` and, if it is a directory, everything under it (symbolic
// links are removed, never followed). An entry that is already gone, or that
// vanishes while this runs, is not an error: two processes may prune the same
// checkpoint root at once, and std::filesystem::remove_all fails with ENOENT
// when another remover takes an entry from under it. kIOError naming the
// entry that could not be deleted.
Status RemoveTree(const std::string& path);

// A checkpoint directory found under a root.
struct CheckpointInfo {
  std::string path;  // <root>/ckpt-...
  std::string name;  // ckpt-...
  uint64_t step = 0;
  bool complete = false;     // has a MANIFEST that reads back intact
  Status manifest_status;    // why not complete
  proto::Manifest manifest;  // when complete
};

// Every ckpt-* directory under `root`, by step ascending. kNotFound when the
// root does not exist.
StatusOr<std::vector<CheckpointInfo>> ListCheckpoints(const std::string& root);
// The newest complete checkpoint under `root` of a step above `above_step`
// (nullopt: any step), or nullopt when there is none, reading MANIFESTs
// newest first and only until one is complete: what a follower that polls
// often needs. kNotFound when the root does not exist.
StatusOr<std::optional<CheckpointInfo>> NewestCompleteCheckpoint(
    const std::string& root, std::optional<uint64_t> above_step);

}  // namespace ps::checkpoint
