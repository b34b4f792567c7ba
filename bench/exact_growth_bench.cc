// Growth of an EXACT table against a HASHED table of as many rows, in one
// process each (--kind), as a server shard holds them: N distinct keys
// (random 64-bit ids) applied in batches, each batch as a server applies
// an EXACT push (sorted by RowIndex::Mix, with the hashes:
// Table::ApplyHashedKeys) and, for HASHED, as the rows the keys hash to. Prints
// the keys/s of the applies, the process's peak RSS, and the bytes per row
// beyond the row's values (SGD: no state): peak RSS less the RSS before the
// table (the bench's own buffers already in it), less the values, over N. Run
// once per kind in the same session and compare: the growth criterion of issue
// 39 asks for at most 24 bytes a row.
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/peak_rss.h"
#include "bench/zipf_keys.h"
#include "cli/flags.h"
#include "table/exact_table.h"
#include "table/param_table.h"
#include "table/row_index.h"

DEFINE_string(kind, "exact", "exact or hashed");
DEFINE_uint64(keys, 100'000'000, "Distinct keys (EXACT) or rows (HASHED).");
DEFINE_uint32(dim, 8, "Row dimension.");
DEFINE_uint64(batch, 1 << 20, "Keys per apply.");

namespace ps::bench {
namespace {

int Run() {
  const bool exact = FLAGS_kind == "exact";
  Status checked =
      exact || FLAGS_kind == "hashed"
          ? Status::OK()
          : InvalidArgument("--kind must be exact or hashed, not '" +
                            FLAGS_kind + "'");
  if (checked.ok()) {
    checked = cli::CheckUintFlag("keys", FLAGS_keys, 1, uint64_t{1} << 32);
  }
  if (checked.ok()) checked = cli::CheckUintFlag("dim", FLAGS_dim, 1, 4096);
  if (checked.ok()) {
    checked = cli::CheckUintFlag("batch", FLAGS_batch, 1, uint64_t{1} << 26);
  }
  if (!checked.ok()) {
    std::fprintf(stderr, "exact_growth_bench: %s\n", checked.message().c_str());
    return 2;
  }
  proto::TableSpec spec;
  spec.set_id(1);
  spec.set_name("grow");
  spec.set_kind(exact ? proto::EXACT : proto::HASHED);
  spec.set_dim(FLAGS_dim);
  spec.set_capacity(FLAGS_keys);
  spec.set_admit_after_pushes(1);
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(0.1f);
  // The bench's own buffers first (touched), so that the RSS the table
  // adds is the table's: its rows, index and scratch.
  std::vector<uint64_t> keys(FLAGS_batch, 1);
  std::vector<uint64_t> hashes(exact ? FLAGS_batch : 0, 1);
  std::vector<uint32_t> rows(exact ? 0 : FLAGS_batch, 1);
  std::vector<float> grads(FLAGS_batch * FLAGS_dim, 1.0f);
  const auto rss_before_kib = RssKib(0);
  if (!rss_before_kib.ok()) {
    std::fprintf(stderr, "%s\n", rss_before_kib.status().ToString().c_str());
    return 1;
  }
  const uint64_t rss_before = *rss_before_kib;
  std::unique_ptr<table::Table> t;
  if (exact) {
    auto made = table::ExactTable::Create(spec);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
      return 1;
    }
    t = std::move(*made);
  } else {
    auto made = table::ParamTable::Create(spec, 0, FLAGS_keys);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
      return 1;
    }
    t = std::move(*made);
  }
  double seconds = 0;
  for (uint64_t b = 0; b < FLAGS_keys; b += FLAGS_batch) {
    const uint64_t n = std::min<uint64_t>(FLAGS_batch, FLAGS_keys - b);
    keys.resize(n);
    for (uint64_t i = 0; i < n; ++i) keys[i] = ZipfKeys::KeyOf(b + i);
    std::sort(keys.begin(), keys.end(), [](uint64_t x, uint64_t y) {
      return table::RowIndex::Mix(x) < table::RowIndex::Mix(y);
    });
    if (exact) {
      hashes.resize(n);
      for (uint64_t i = 0; i < n; ++i) {
        hashes[i] = table::RowIndex::Mix(keys[i]);
      }
    } else {
      rows.resize(n);
      for (uint64_t i = 0; i < n; ++i) {
        rows[i] =
            static_cast<uint32_t>(table::RowIndex::Mix(keys[i]) % FLAGS_keys);
      }
      std::sort(rows.begin(), rows.end());
    }
    const auto start = std::chrono::steady_clock::now();
    const std::span<float> g(grads.data(), n * FLAGS_dim);
    const Status s =
        exact ? t->ApplyHashedKeys(1, keys, hashes, g)
              : t->ApplyRows(1, rows, g, kernels::AccumulateMode::kExclusive);
    seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  const auto peak_kib = PeakRssKib(0);
  if (!peak_kib.ok()) {
    std::fprintf(stderr, "%s\n", peak_kib.status().ToString().c_str());
    return 1;
  }
  const uint64_t peak = *peak_kib;
  const double row_bytes = 4.0 * FLAGS_dim;
  const double beyond =
      (static_cast<double>(peak - rss_before) * 1024 - row_bytes * FLAGS_keys) /
      static_cast<double>(FLAGS_keys);
  std::printf(
      "%s keys %lu dim %u: %.2f M keys/s, peak RSS %.0f MiB, %.1f B a row "
      "beyond its %.0f B\n",
      FLAGS_kind.c_str(), static_cast<unsigned long>(FLAGS_keys), FLAGS_dim,
      FLAGS_keys / seconds / 1e6, peak / 1024.0, beyond, row_bytes);
  // For scripts/bench_ps.sh, as ps_bench prints its figures.
  std::printf(
      "RESULT mode=growth insert_mkeys_per_s=%.2f peak_rss_mib=%.0f "
      "bytes_per_row=%.1f\n",
      FLAGS_keys / seconds / 1e6, peak / 1024.0, beyond);
  return 0;
}

}  // namespace
}  // namespace ps::bench

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "exact_growth_bench --kind=exact|hashed [--keys=N --dim=D --batch=B]: "
      "keys/s, peak RSS and bytes a row beyond its values of a table that "
      "grows to N keys");
  if (ps::Status s = ps::cli::ParseFlags(&argc, &argv); !s.ok()) {
    std::fprintf(stderr, "exact_growth_bench: %s\n", s.message().c_str());
    return 2;
  }
  return ps::bench::Run();
}
