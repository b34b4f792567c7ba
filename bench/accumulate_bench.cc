// Server-side apply speed: decode sparse packets and fold them into a table.
//
//   BM_DecodeAccumulate/threads:N  each of N threads decodes packets (fp16
//       values, 100k rows at 1% density of a 10M-row, dim-1 table, rows
//       strictly increasing as the format has them) and adds them with
//       atomic float adds into the one shared table, as N apply threads of
//       a server do. items_per_second = nonzeros per second of
//       all threads together, by the wall clock (so a busy machine lowers
//       it; compare the CPU column). scripts/bench_kernels.sh reads these
//       names.
//   BM_DecodeAccumulateExclusive   the same on one thread with the
//       non-atomic single-owner path (a server's one apply thread).
//   BM_Decode                      decoding alone (the reference that shows
//       how much of the time accumulation takes).
//   BM_Accumulate/<mode>/<dim>/<table rows>  accumulation alone of already
//       decoded rows; the 1M-row table fits the last-level cache, the
//       10M-row one does not.
//   BM_Optimizer<name>/<dim>       optimizer steps on 10k random rows of a
//       table of 4M floats; items_per_second = rows per second.
// Except for BM_DecodeAccumulate*, items_per_second is per CPU second (the
// library's default), which a busy shared machine disturbs less.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "bench/bench_main.h"
#include "kernels/optimizers.h"
#include "kernels/sparse_accumulate.h"
#include "protocol/sparse_packet.h"

namespace ps::kernels {
namespace {

using protocol::DecodeSparsePacket;
using protocol::EncodedPacket;
using protocol::EncodeSparsePackets;
using protocol::MaxSparsePacketBytes;
using protocol::SparsePacketExpectations;
using protocol::SparsePacketHeader;
using protocol::SparsePacketMeta;

constexpr uint64_t kTableRows = 10'000'000;
constexpr uint32_t kPacketRows = 100'000;  // 1% of the table
constexpr int kPackets = 8;

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "accumulate_bench: %s\n", s.ToString().c_str());
    std::abort();
  }
}

// A zeroed float table. Large tables ask for transparent huge pages, as a
// server's registered shard memory would, so TLB misses do not dominate.
struct Table {
  explicit Table(size_t floats) : size(floats) {
    const size_t huge = size_t{2} << 20;
    bytes = (floats * sizeof(float) + huge - 1) / huge * huge;
    data = static_cast<float*>(std::aligned_alloc(huge, bytes));
    madvise(data, bytes, MADV_HUGEPAGE);
    std::memset(data, 0, bytes);
  }
  ~Table() { std::free(data); }
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;
  float* data;
  size_t size;
  size_t bytes;
};

std::vector<uint32_t> SortedUniqueRows(std::mt19937& rng, uint64_t table_rows,
                                       size_t count) {
  std::uniform_int_distribution<uint32_t> row(0, table_rows - 1);
  std::vector<uint32_t> rows;
  while (rows.size() < count) {
    while (rows.size() < count) rows.push_back(row(rng));
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  }
  return rows;
}

// Packets of fp16 gradients, made once and shared by all benchmarks.
struct PacketSet {
  PacketSet() {
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 0.01f);
    SparsePacketMeta meta;
    meta.value_type = ValueType::kFp16;
    meta.row_dim = 1;
    for (int p = 0; p < kPackets; ++p) {
      const std::vector<uint32_t> rows =
          SortedUniqueRows(rng, kTableRows, kPacketRows);
      std::vector<float> values(rows.size());
      for (float& v : values) v = normal(rng);
      std::vector<uint8_t> out;
      std::vector<EncodedPacket> list;
      Check(EncodeSparsePackets(meta, rows, values,
                                MaxSparsePacketBytes(meta, rows.size()), &out,
                                &list));
      if (list.size() != 1) std::abort();  // sized to fit one packet
      packets.push_back(std::move(out));
      decoded_rows.push_back(rows);
      decoded_values.push_back(values);
    }
    expect.table_rows = kTableRows;
    expect.row_dim = 1;
  }
  std::vector<std::vector<uint8_t>> packets;
  std::vector<std::vector<uint32_t>> decoded_rows;
  std::vector<std::vector<float>> decoded_values;
  SparsePacketExpectations expect;
};

const PacketSet& Packets() {
  static const PacketSet set;
  return set;
}

Table& SharedTable() {
  static Table table(kTableRows);
  return table;
}

// Decode buffers per thread, reused across iterations as an apply thread
// would.
struct DecodeBuffers {
  std::vector<uint32_t> rows = std::vector<uint32_t>(kPacketRows);
  std::vector<float> values = std::vector<float>(kPacketRows);
};

void DecodeAccumulate(benchmark::State& state, AccumulateMode mode) {
  const PacketSet& set = Packets();
  Table& table = SharedTable();
  DecodeBuffers buffers;
  int next = state.thread_index();
  int64_t nnz = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const std::vector<uint8_t>& packet = set.packets[next++ % kPackets];
    SparsePacketHeader header;
    Check(DecodeSparsePacket(packet, set.expect, buffers.rows, buffers.values,
                             &header));
    const uint32_t n = header.row_count;
    Check(AccumulateRows(std::span(buffers.rows).first(n),
                         std::span(buffers.values).first(n),
                         DenseRows{table.data, kTableRows, 1}, mode));
    nnz += n;
  }
  // Wall-clock rate of this thread; the library sums counters over threads,
  // so the reported figure is the throughput of all threads together.
  // (SetItemsProcessed would divide by the summed CPU time instead, a
  // per-core figure, and UseRealTime would change the benchmark's name.)
  const std::chrono::duration<double> seconds =
      std::chrono::steady_clock::now() - start;
  state.counters["items_per_second"] =
      benchmark::Counter(static_cast<double>(nnz) / seconds.count());
}

void BM_DecodeAccumulate(benchmark::State& state) {
  DecodeAccumulate(state, AccumulateMode::kAtomic);
}
BENCHMARK(BM_DecodeAccumulate)->Threads(1)->Threads(2);

void BM_DecodeAccumulateExclusive(benchmark::State& state) {
  DecodeAccumulate(state, AccumulateMode::kExclusive);
}
BENCHMARK(BM_DecodeAccumulateExclusive);

void BM_Decode(benchmark::State& state) {
  const PacketSet& set = Packets();
  DecodeBuffers buffers;
  int next = 0;
  int64_t nnz = 0;
  for (auto _ : state) {
    SparsePacketHeader header;
    Check(DecodeSparsePacket(set.packets[next++ % kPackets], set.expect,
                             buffers.rows, buffers.values, &header));
    nnz += header.row_count;
  }
  state.SetItemsProcessed(nnz);
}
BENCHMARK(BM_Decode);

// Args: mode (0 atomic, 1 exclusive), dim, table rows.
void BM_Accumulate(benchmark::State& state) {
  const AccumulateMode mode = state.range(0) == 0 ? AccumulateMode::kAtomic
                                                  : AccumulateMode::kExclusive;
  const uint32_t dim = static_cast<uint32_t>(state.range(1));
  const uint64_t table_rows = static_cast<uint64_t>(state.range(2));
  // Keep the touched floats near 100k per call whatever the dim.
  const size_t count = std::max<size_t>(1, kPacketRows / dim);
  Table table(table_rows * dim);
  std::mt19937 rng(7);
  std::vector<std::vector<uint32_t>> rows;
  for (int p = 0; p < kPackets; ++p) {
    rows.push_back(SortedUniqueRows(rng, table_rows, count));
  }
  const std::vector<float> values(count * dim, 0.5f);
  int next = 0;
  for (auto _ : state) {
    Check(AccumulateRows(rows[next++ % kPackets], values,
                         DenseRows{table.data, table_rows, dim}, mode));
  }
  state.SetItemsProcessed(state.iterations() * count * dim);
  state.SetLabel(mode == AccumulateMode::kAtomic ? "atomic" : "exclusive");
}
BENCHMARK(BM_Accumulate)
    ->ArgNames({"mode", "dim", "rows"})
    ->Args({0, 1, 10'000'000})
    ->Args({1, 1, 10'000'000})
    ->Args({0, 1, 1'000'000})
    ->Args({1, 1, 1'000'000})
    ->Args({0, 16, 1'000'000})
    ->Args({1, 16, 1'000'000});

// Optimizer steps on 10k sorted random rows of a table of 4M floats (16 MiB
// per array: parameters and state together exceed the caches for the
// two-state optimizers).
void OptimizerRows(benchmark::State& state, const OptimizerConfig& config) {
  const uint32_t dim = static_cast<uint32_t>(state.range(0));
  const uint64_t table_rows = (uint64_t{4} << 20) / dim;
  const size_t count = 10'000;
  Table params(table_rows * dim);
  std::vector<std::unique_ptr<Table>> states;
  OptimizerTable table{params.data, {nullptr, nullptr}, table_rows, dim};
  for (int s = 0; s < StateFloatsPerParameter(config); ++s) {
    states.push_back(std::make_unique<Table>(table_rows * dim));
    std::fill(states.back()->data, states.back()->data + table_rows * dim,
              0.1f);
    table.state[s] = states.back()->data;
  }
  std::mt19937 rng(9);
  std::vector<std::vector<uint32_t>> rows;
  for (int p = 0; p < kPackets; ++p) {
    rows.push_back(SortedUniqueRows(rng, table_rows, count));
  }
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> grads(count * dim);
  for (float& g : grads) g = normal(rng);
  uint64_t step = 1;
  for (auto _ : state) {
    Check(ApplyOptimizerToRows(config, step, table, rows[step % kPackets],
                               grads));
    ++step;
  }
  state.SetItemsProcessed(state.iterations() * count);
}

void BM_OptimizerSgd(benchmark::State& s) { OptimizerRows(s, SgdConfig{}); }
void BM_OptimizerMomentum(benchmark::State& s) {
  OptimizerRows(s, MomentumConfig{});
}
void BM_OptimizerAdagrad(benchmark::State& s) {
  OptimizerRows(s, AdagradConfig{});
}
void BM_OptimizerAdam(benchmark::State& s) { OptimizerRows(s, AdamConfig{}); }
void BM_OptimizerFtrl(benchmark::State& s) { OptimizerRows(s, FtrlConfig{}); }
BENCHMARK(BM_OptimizerSgd)->ArgName("dim")->Arg(1)->Arg(16)->Arg(64);
BENCHMARK(BM_OptimizerMomentum)->ArgName("dim")->Arg(1)->Arg(16)->Arg(64);
BENCHMARK(BM_OptimizerAdagrad)->ArgName("dim")->Arg(1)->Arg(16)->Arg(64);
BENCHMARK(BM_OptimizerAdam)->ArgName("dim")->Arg(1)->Arg(16)->Arg(64);
BENCHMARK(BM_OptimizerFtrl)->ArgName("dim")->Arg(1)->Arg(16)->Arg(64);

}  // namespace
}  // namespace ps::kernels

int main(int argc, char** argv) {
  return ps::bench::BenchmarkMain(
      argc, argv,
      "server-side apply speed: decoding sparse packets and adding them into "
      "a table on N threads (BM_DecodeAccumulate), decoding or accumulation "
      "alone, and optimizer steps (BM_Optimizer*); "
      "scripts/bench_kernels.sh");
}
