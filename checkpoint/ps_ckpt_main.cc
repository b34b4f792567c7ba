// ps_ckpt: look at and check checkpoints.
//
//   ps_ckpt list    --dir=/ckpt            every ckpt-* with its state (and
//                                          which one is marked BEST)
//   ps_ckpt inspect --checkpoint=/ckpt/ckpt-000000000100   the manifest
//   ps_ckpt verify  --checkpoint=PATH      scan every shard: counts, checksums
//   ps_ckpt verify  --dir=/ckpt            verify every complete checkpoint
//   ps_ckpt export  --checkpoint=PATH --out=DIR [--tables=a,b]
//                                          its tables as NumPy .npy files
//                                          and tables.json (checkpoint/
//                                          exporter.h says what they hold)
//
// Exit codes: 0 fine, 1 a checkpoint is damaged or missing, 2 bad usage
// (export: an unknown table, an output folder that is not empty), 3 export
// could not write its output (a full disk, say).
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>
#include <string>

#include "checkpoint/best_marker.h"
#include "checkpoint/exporter.h"
#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "cli/flags.h"
#include "cli/guarded_main.h"
#include "protocol/spec_choices.h"

DEFINE_string(dir, "", "Checkpoint root (the servers' --checkpoint_dir).");
DEFINE_string(checkpoint, "",
              "One checkpoint directory (<dir>/ckpt-<step>), or 'latest' "
              "or 'best' (the one ps_worker --early_stop marked) with --dir.");
DEFINE_string(out, "",
              "export: the folder for the files (created; must be empty).");
DEFINE_string(tables, "",
              "export: the tables to export, by name, comma-separated "
              "(default: all).");
DEFINE_int32(readers, 0,
             "export: threads reading a shard's HASHED/DENSE rows at once "
             "(0: one per hardware thread, at most 8).");

namespace {

constexpr int kExitOk = 0, kExitDamaged = 1, kExitUsage = 2,
              kExitCannotWrite = 3;

std::string KindName(ps::checkpoint::proto::Kind k) {
  return k == ps::checkpoint::proto::FULL ? "full" : "incremental";
}

std::string Mb(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f MB", bytes / 1e6);
  return b;
}

int List() {
  auto all = ps::checkpoint::ListCheckpoints(FLAGS_dir);
  if (!all.ok()) {
    std::fprintf(stderr, "ps_ckpt: %s\n", all.status().ToString().c_str());
    return kExitDamaged;
  }
  if (all->empty()) std::printf("no checkpoints under %s\n", FLAGS_dir.c_str());
  auto best = ps::checkpoint::ReadBestMarker(FLAGS_dir);
  if (!best.ok() && !best.status().Is(ps::StatusCode::kNotFound)) {
    std::fprintf(stderr, "ps_ckpt: %s\n", best.status().ToString().c_str());
  }
  for (const auto& c : *all) {
    if (!c.complete) {
      std::printf("%s  step %llu  INCOMPLETE: %s\n", c.name.c_str(),
                  static_cast<unsigned long long>(c.step),
                  c.manifest_status.ToString().c_str());
      continue;
    }
    const auto& m = c.manifest;
    std::string mark;
    if (best.ok() && best->step() == c.step) {
      char b[128];
      std::snprintf(b, sizeof(b), "  BEST (eval logloss %.4f, AUC %.4f)",
                    best->eval_logloss(), best->eval_auc());
      mark = b;
    }
    std::printf("%s  step %llu  %s%s  %u shards  %s%s\n", c.name.c_str(),
                static_cast<unsigned long long>(c.step),
                KindName(m.kind()).c_str(),
                m.parent().empty() ? "" : (" of " + m.parent()).c_str(),
                m.num_shards(), Mb(m.total_bytes()).c_str(), mark.c_str());
  }
  return kExitOk;
}

std::string ResolveCheckpoint() {
  if (FLAGS_checkpoint == "best") {
    auto best = ps::checkpoint::ReadBestMarker(FLAGS_dir);
    if (!best.ok()) return "";
    return ps::checkpoint::JoinPath(
        FLAGS_dir, ps::checkpoint::CheckpointDirName(best->step()));
  }
  if (FLAGS_checkpoint != "latest") return FLAGS_checkpoint;
  auto all = ps::checkpoint::ListCheckpoints(FLAGS_dir);
  if (!all.ok()) return "";
  for (auto it = all->rbegin(); it != all->rend(); ++it) {
    if (it->complete) return it->path;
  }
  return "";
}

int Inspect() {
  const std::string path = ResolveCheckpoint();
  if (path.empty()) {
    std::fprintf(stderr, "ps_ckpt: no complete checkpoint under %s\n",
                 FLAGS_dir.c_str());
    return kExitDamaged;
  }
  auto m = ps::checkpoint::ReadManifest(path);
  if (!m.ok()) {
    std::fprintf(stderr, "ps_ckpt: %s\n", m.status().ToString().c_str());
    return kExitDamaged;
  }
  const time_t created = static_cast<time_t>(m->created_unix_ms() / 1000);
  char when[64];
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S",
                std::localtime(&created));
  std::printf("%s\n  step %llu, %s%s, %u shards, %s, format %u, created %s\n",
              path.c_str(), static_cast<unsigned long long>(m->step()),
              KindName(m->kind()).c_str(),
              m->parent().empty() ? "" : (" of " + m->parent()).c_str(),
              m->num_shards(), Mb(m->total_bytes()).c_str(),
              m->format_version(), when);
  for (const auto& t : m->tables()) {
    // Manifests before the enums carry the optimizer's name only.
    auto optimizer = ps::protocol::OptimizerKindOf(t.optimizer());
    const std::string optimizer_name =
        optimizer.ok()
            ? std::string(ps::protocol::OptimizerKindName(*optimizer))
            : t.optimizer().name();
    std::printf(
        "  table %s (id %u, %s, dim %u, capacity %llu, %s)\n", t.name().c_str(),
        t.id(), ps::proto::TableKind_Name(t.kind()).c_str(), t.dim(),
        static_cast<unsigned long long>(t.capacity()), optimizer_name.c_str());
  }
  for (const auto& s : m->shards()) {
    const std::string linked =
        s.linked_bytes() > 0
            ? " (" + Mb(s.linked_bytes()) + " of it disk tier files linked)"
            : "";
    std::printf(
        "  shard %u: %s, %llu entries, %s%s, checksum %016llx, cut "
        "pause %.1f ms, write %.0f ms\n",
        s.shard_id(), s.path().c_str(),
        static_cast<unsigned long long>(s.entries()), Mb(s.bytes()).c_str(),
        linked.c_str(), static_cast<unsigned long long>(s.checksum()),
        s.cut_pause_ms(), s.write_ms());
    for (const auto& t : s.tables()) {
      // Format 2 stores HASHED/DENSE rows in runs (checkpoint/row_codec.h).
      const std::string runs =
          t.rows_per_entry() > 1
              ? " (up to " + std::to_string(t.rows_per_entry()) + " rows each)"
              : "";
      const std::string on_disk =
          t.disk_tier_path().empty()
              ? ""
              : ", its rows on disk in " + t.disk_tier_path();
      std::printf(
          "    table id %u: %s, %llu entries%s%s, optimizer steps %llu\n",
          t.table_id(), t.full() ? "full" : "changed rows",
          static_cast<unsigned long long>(t.entries()), runs.c_str(),
          on_disk.c_str(),
          static_cast<unsigned long long>(t.optimizer_steps()));
    }
  }
  for (const auto& w : m->workers()) {
    std::printf("  worker %u: step %llu, epoch %llu, %llu examples into it\n",
                w.worker_id(), static_cast<unsigned long long>(w.step()),
                static_cast<unsigned long long>(w.epoch()),
                static_cast<unsigned long long>(w.examples_consumed()));
  }
  return kExitOk;
}

int VerifyOne(const std::string& path) {
  auto m = ps::checkpoint::VerifyCheckpoint(path);
  if (!m.ok()) {
    std::printf("%s: DAMAGED: %s\n", path.c_str(),
                m.status().ToString().c_str());
    return kExitDamaged;
  }
  uint64_t entries = 0;
  for (const auto& s : m->shards()) entries += s.entries();
  std::printf("%s: OK (%u shards, %llu entries, checksums match)\n",
              path.c_str(), m->num_shards(),
              static_cast<unsigned long long>(entries));
  return kExitOk;
}

int Verify() {
  if (!FLAGS_checkpoint.empty()) {
    const std::string path = ResolveCheckpoint();
    if (path.empty()) {
      std::fprintf(stderr, "ps_ckpt: no complete checkpoint under %s\n",
                   FLAGS_dir.c_str());
      return kExitDamaged;
    }
    return VerifyOne(path);
  }
  auto all = ps::checkpoint::ListCheckpoints(FLAGS_dir);
  if (!all.ok()) {
    std::fprintf(stderr, "ps_ckpt: %s\n", all.status().ToString().c_str());
    return kExitDamaged;
  }
  int rc = kExitOk;
  for (const auto& c : *all) {
    if (!c.complete) {
      if (!c.manifest_status.Is(ps::StatusCode::kNotFound)) {
        std::printf("%s: DAMAGED: %s\n", c.path.c_str(),
                    c.manifest_status.ToString().c_str());
        rc = kExitDamaged;
      } else {
        std::printf("%s: incomplete (ignored by restore)\n", c.path.c_str());
      }
      continue;
    }
    if (VerifyOne(c.path) != kExitOk) rc = kExitDamaged;
  }
  return rc;
}

int Export() {
  const std::string path = ResolveCheckpoint();
  if (path.empty()) {
    std::fprintf(stderr, "ps_ckpt: no complete checkpoint under %s\n",
                 FLAGS_dir.c_str());
    return kExitDamaged;
  }
  ps::checkpoint::ExportOptions options;
  options.out_dir = FLAGS_out;
  options.readers = FLAGS_readers;
  std::stringstream names(FLAGS_tables);
  for (std::string name; std::getline(names, name, ',');) {
    if (!name.empty()) options.tables.push_back(name);
  }
  const auto start = std::chrono::steady_clock::now();
  auto r = ps::checkpoint::ExportCheckpoint(path, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!r.ok()) {
    std::fprintf(stderr, "ps_ckpt: %s\n", r.status().ToString().c_str());
    if (r.status().Is(ps::StatusCode::kInvalidArgument)) return kExitUsage;
    if (r.status().Is(ps::StatusCode::kIOError)) return kExitCannotWrite;
    return kExitDamaged;
  }
  std::printf("exported %s (step %llu, %zu checkpoint(s) in its chain) to %s\n",
              path.c_str(), static_cast<unsigned long long>(r->manifest.step()),
              r->chain.size(), FLAGS_out.c_str());
  for (const auto& t : r->tables) {
    std::printf("  table %s (%s, dim %u): %llu rows -> %s%s%s\n",
                t.spec.name().c_str(),
                ps::proto::TableKind_Name(t.spec.kind()).c_str(), t.spec.dim(),
                static_cast<unsigned long long>(t.rows), t.rows_file.c_str(),
                t.keys_file.empty() ? "" : ", ", t.keys_file.c_str());
  }
  std::printf("  read %s, wrote %s in %.3f s (%.1f MB/s written)\n",
              Mb(r->bytes_read).c_str(), Mb(r->bytes_written).c_str(), seconds,
              seconds > 0 ? r->bytes_written / seconds / 1e6 : 0.0);
  return kExitOk;
}

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "lists, inspects and verifies parameter-server checkpoints.\n"
      "  ps_ckpt list --dir=ROOT\n"
      "  ps_ckpt inspect --checkpoint=PATH | --dir=ROOT "
      "--checkpoint=latest|best\n"
      "  ps_ckpt verify --checkpoint=PATH | --dir=ROOT\n"
      "  ps_ckpt export --checkpoint=PATH | --dir=ROOT "
      "[--checkpoint=latest|best] --out=DIR [--tables=a,b]");
  // gflags exits with 1 on an unknown flag, which here means "damaged".
  if (ps::Status s = ps::cli::PrecheckFlags(argc, argv); !s.ok()) {
    std::fprintf(stderr, "ps_ckpt: %s\n", s.message().c_str());
    return kExitUsage;
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc != 2) {
    std::fprintf(stderr,
                 "ps_ckpt: give one command: list, inspect or verify (see "
                 "--help)\n");
    return kExitUsage;
  }
  const std::string command = argv[1];
  const bool need_dir = command == "list" || FLAGS_checkpoint.empty() ||
                        FLAGS_checkpoint == "latest" ||
                        FLAGS_checkpoint == "best";
  if (need_dir && FLAGS_dir.empty()) {
    std::fprintf(stderr, "ps_ckpt %s: --dir is required%s\n", command.c_str(),
                 command == "list" ? "" : " (or --checkpoint=PATH)");
    return kExitUsage;
  }
  if (command == "list") return List();
  if (command == "inspect") {
    if (FLAGS_checkpoint.empty()) FLAGS_checkpoint = "latest";
    return Inspect();
  }
  if (command == "verify") return Verify();
  if (command == "export") {
    if (FLAGS_out.empty()) {
      std::fprintf(stderr, "ps_ckpt export: --out is required\n");
      return kExitUsage;
    }
    if (FLAGS_checkpoint.empty()) FLAGS_checkpoint = "latest";
    return Export();
  }
  std::fprintf(stderr,
               "ps_ckpt: unknown command '%s' (list, inspect, verify, "
               "export)\n",
               command.c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  return ps::cli::GuardedMain("ps_ckpt", [&] { return Main(argc, argv); });
}
