// Sparse packet codec speed and size:
//   BM_Encode/<type>   encoding 1% of a 4M-row dim-1 table (40k nonzeros)
//                      into 64 KiB packets; items_per_second = nonzeros/s;
//                      wire_bytes_per_nnz = all packet bytes / nonzeros
//                      (the reference: a plain uint32 + fp16 COO pair is 6)
//   BM_Decode/<type>   validating and decoding those packets into buffers
// <type>: 0 fp32, 1 fp16, 2 bf16, 3 int8.
#include <benchmark/benchmark.h>

#include <random>
#include <set>
#include <vector>

#include "bench/bench_main.h"
#include "protocol/sparse_packet.h"

namespace ps::kernels {
namespace {

using protocol::DecodeSparsePacket;
using protocol::EncodedPacket;
using protocol::EncodeSparsePackets;
using protocol::SparsePacketExpectations;
using protocol::SparsePacketMeta;

constexpr uint32_t kTableRows = 4u << 20;
constexpr size_t kNnz = kTableRows / 100;
constexpr size_t kSlotBytes = 64 << 10;

struct Push {
  std::vector<uint32_t> rows;
  std::vector<float> values;
};

const Push& OnePercentPush() {
  static const Push push = [] {
    std::mt19937 rng(1);
    std::uniform_int_distribution<uint32_t> row(0, kTableRows - 1);
    std::set<uint32_t> picked;
    while (picked.size() < kNnz) picked.insert(row(rng));
    Push p;
    p.rows.assign(picked.begin(), picked.end());
    std::normal_distribution<float> d(0.0f, 0.01f);
    for (size_t i = 0; i < kNnz; ++i) p.values.push_back(d(rng));
    return p;
  }();
  return push;
}

SparsePacketMeta Meta(int type) {
  return SparsePacketMeta{.table_id = 1,
                          .value_type = static_cast<ValueType>(type)};
}

void BM_Encode(benchmark::State& state) {
  const Push& push = OnePercentPush();
  const SparsePacketMeta meta = Meta(static_cast<int>(state.range(0)));
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  for (auto _ : state) {
    if (!EncodeSparsePackets(meta, push.rows, push.values, kSlotBytes, &out,
                             &packets)
             .ok())
      state.SkipWithError("encode failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * int64_t(kNnz));
  state.counters["wire_bytes_per_nnz"] = static_cast<double>(out.size()) / kNnz;
  state.counters["packets"] = static_cast<double>(packets.size());
  state.SetLabel(std::string(ValueTypeName(meta.value_type)));
}
BENCHMARK(BM_Encode)->DenseRange(0, 3);

void BM_Decode(benchmark::State& state) {
  const Push& push = OnePercentPush();
  const SparsePacketMeta meta = Meta(static_cast<int>(state.range(0)));
  std::vector<uint8_t> out;
  std::vector<EncodedPacket> packets;
  if (!EncodeSparsePackets(meta, push.rows, push.values, kSlotBytes, &out,
                           &packets)
           .ok()) {
    state.SkipWithError("encode failed");
    return;
  }
  std::vector<uint32_t> rows(kNnz);
  std::vector<float> values(kNnz);
  const SparsePacketExpectations ex{
      .table_rows = kTableRows, .row_dim = 1, .table_id = 1};
  for (auto _ : state) {
    for (const EncodedPacket& pk : packets) {
      if (!DecodeSparsePacket(std::span(out).subspan(pk.offset, pk.size), ex,
                              rows, values, nullptr)
               .ok())
        state.SkipWithError("decode failed");
    }
    benchmark::DoNotOptimize(values.data());
  }
  state.SetItemsProcessed(state.iterations() * int64_t(kNnz));
  state.SetBytesProcessed(state.iterations() * int64_t(out.size()));
  state.SetLabel(std::string(ValueTypeName(meta.value_type)));
}
BENCHMARK(BM_Decode)->DenseRange(0, 3);

}  // namespace
}  // namespace ps::kernels

int main(int argc, char** argv) {
  return ps::bench::BenchmarkMain(
      argc, argv,
      "speed and wire size of the sparse packet codec: BM_Encode/<type> "
      "encodes 1% of a 4M-row dim-1 table into 64 KiB packets, "
      "BM_Decode/<type> validates and decodes them (<type>: 0 fp32, 1 fp16, "
      "2 bf16, 3 int8)");
}
