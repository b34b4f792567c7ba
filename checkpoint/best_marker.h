// The best-checkpoint marker of a checkpoint root (<root>/BEST, a framed
// BestMarker, checkpoint/checkpoint.proto): which complete checkpoint
// ps_worker --early_stop found best. Shard 0's server writes it (through a
// temporary file and a rename, like every small checkpoint file: a reader
// sees the old marker or the new one); retention (committer.h) keeps the
// checkpoint it names with its parents; ps_server --restore_from=best
// restores that one; ps_ckpt list shows it.
//
// Thread-safety: the functions touch only the files named; one writer at a
// time (shard 0).
#pragma once

#include <string>

#include "base/status.h"
#include "base/status_or.h"
#include "checkpoint/checkpoint.pb.h"

namespace ps::checkpoint {

inline constexpr char kBestMarkerName[] = "BEST";

// Replaces the root's marker. kIOError naming the path.
Status WriteBestMarker(const std::string& root, const proto::BestMarker& m);
// kNotFound: no marker (no eval point was the best of a checkpoint yet);
// kCorruption naming the file when it does not read back.
StatusOr<proto::BestMarker> ReadBestMarker(const std::string& root);

}  // namespace ps::checkpoint
