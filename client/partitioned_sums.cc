#include "client/partitioned_sums.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/avx512_intrinsics.h"
#include "kernels/cpu_features.h"

namespace ps::worker {
namespace {

// A bucket's slice of sums: at most this many floats (256 KiB), so that a
// thread's slice stays in its L2 cache while the bucket's pairs stream by.
constexpr uint32_t kSliceFloats = 1u << 16;
// At most this many buckets per shard: the scatter writes to one stream per
// bucket, and more streams than the TLB and the write buffers can follow
// would make it as random as the adds it replaces.
constexpr uint64_t kMaxBucketsPerShard = 2048;
// Pushes of fewer keys run on the calling thread: waking the pool costs more.
constexpr size_t kMinKeysPerPart = 1u << 16;
// Rows per run handed to the caller: a few packets' worth, so the first
// reach the server while the rest are summed.
constexpr size_t kRunRows = 1u << 15;
// Pairs per chunk of a bucket's chain: at least 8 lines (a TLB-friendly
// 512 bytes), at most 32 KiB.
constexpr uint64_t kMinChunkPairs = 64;
constexpr uint64_t kMaxChunkPairs = 4096;

// Copies one 64-byte line of pairs to `dst` (64-byte aligned) with
// non-temporal stores (SSE2: every x86-64 has them).
inline void StreamLine(void* dst, const void* src) {
  auto* d = static_cast<__m128i*>(dst);
  const auto* s = static_cast<const __m128i*>(src);
  for (int k = 0; k < 4; ++k) _mm_stream_si128(d + k, _mm_loadu_si128(s + k));
}

uint32_t CeilLog2(uint64_t x) {
  return x <= 1 ? 0 : 64 - std::countl_zero(x - 1);
}

// How far ahead of the sum the pairs are fetched into the cache.
constexpr ptrdiff_t kPrefetchPairs = 256;

// Rows and values a drain may write past the last row it drains: the
// AVX-512 drain stores sixteen lanes at a time.
constexpr size_t kDrainSlack = 16;

// Moves the touched rows of a dim-1 slice (set bits of `bits`, `words`
// words) into rows[n...] (as base + offset) and values[n...], in row order,
// zeroing the slice and the bits; returns the new n. Sixteen slots at a
// time, compressed in registers (a compress straight to memory is slow on
// AMD's Zen 4); each step stores sixteen lanes, hence kDrainSlack.
[[gnu::target("avx512f")]] size_t DrainDim1Avx512(float* slice, uint64_t* bits,
                                                  uint32_t words, uint32_t base,
                                                  uint32_t* rows, float* values,
                                                  size_t n) {
  const __m512i lanes =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (uint32_t w = 0; w < words; ++w) {
    uint64_t word = bits[w];
    if (word == 0) continue;
    bits[w] = 0;
    for (uint32_t q = 0; q < 4; ++q, word >>= 16) {
      const auto mask = static_cast<__mmask16>(word);
      if (mask == 0) continue;
      const uint32_t off = w * 64 + q * 16;
      const __m512 sums = _mm512_loadu_ps(slice + off);
      _mm512_storeu_ps(slice + off, _mm512_setzero_ps());
      const __m512i at = _mm512_add_epi32(
          _mm512_set1_epi32(static_cast<int>(base + off)), lanes);
      _mm512_storeu_ps(values + n, _mm512_maskz_compress_ps(mask, sums));
      _mm512_storeu_si512(rows + n, _mm512_maskz_compress_epi32(mask, at));
      n += std::popcount(static_cast<uint32_t>(mask));
    }
  }
  return n;
}

}  // namespace

void PartitionedSums::Layout(const ShardRouter& router, uint32_t dim) {
  dim_ = dim;
  uint64_t rows_max = 1;
  for (uint32_t s = 0; s < router.shards(); ++s) {
    rows_max = std::max(rows_max, router.RowsOf(s));
  }
  const uint32_t fit = std::bit_width(std::max(1u, kSliceFloats / dim)) - 1;
  shift_ = std::max(
      {6u, fit,
       CeilLog2((rows_max + kMaxBucketsPerShard - 1) / kMaxBucketsPerShard)});
  bucket_base_.assign(router.shards() + 1, 0);
  bucket_shard_.clear();
  for (uint32_t s = 0; s < router.shards(); ++s) {
    const uint64_t n =
        (router.RowsOf(s) + (uint64_t{1} << shift_) - 1) >> shift_;
    bucket_base_[s + 1] = bucket_base_[s] + static_cast<uint32_t>(n);
    bucket_shard_.insert(bucket_shard_.end(), n, s);
  }
}

// Where a global row's pair goes: its bucket and its shard-local row. The
// pass over the keys holds its own copy, so its fields stay in registers.
struct PartitionedSums::Locator {
  uint32_t shift;
  bool one_shard;                // a copy, not a load through router per key
  const ShardRouter* router;     // for tables of several shards
  const uint32_t* first_bucket;  // per shard

  // kOneShard: the caller has checked one_shard (the pass over the keys is
  // compiled once per case, so the test is not made per key).
  template <bool kOneShard>
  uint32_t Locate(uint64_t row, uint32_t* local_row) const {
    if (kOneShard) {
      *local_row = static_cast<uint32_t>(row);
      return static_cast<uint32_t>(row >> shift);
    }
    const uint32_t s = router->ShardOfRow(row);
    *local_row = static_cast<uint32_t>(row - router->FirstRow(s));
    return first_bucket[s] + (*local_row >> shift);
  }
};

// One pass: a block of keys is hashed at once (vectorised), then each pair
// goes to its bucket's cache-line buffer; a full line goes to the bucket's
// current chunk in one non-temporal store (no read of the line it replaces,
// no eviction of the buffers). A bucket's line that starts a chunk takes
// the arena's next chunk; lines never straddle chunks (chunk_pairs_ is a
// multiple of a line). The partial last lines are stored one by one.
void PartitionedSums::Partition(const RowHash& hash, const Locator& where,
                                std::span<const uint64_t> keys,
                                std::span<const float> grads, size_t part) {
  constexpr uint64_t kLine = kPairsPerLine;
  const Locator at = where;
  const size_t buckets = bucket_shard_.size();
  const uint64_t chunk_mask = chunk_pairs_ - 1;
  const size_t begin = key_begin_[part], end = key_begin_[part + 1];
  PartOutput& out = out_[part];
  // Every bucket may end with one chunk partly filled.
  const size_t max_chunks = (end - begin) / chunk_pairs_ + buckets;
  out.lines.Resize(buckets * kLine);
  out.chunks.Resize(max_chunks * chunk_pairs_);
  out.next.resize(max_chunks);
  out.head.assign(buckets, kNoChunk);
  out.tail.assign(buckets, kNoChunk);
  out.count.assign(buckets, 0);
  Pair* lines = out.lines.data();
  Pair* chunks = out.chunks.data();
  uint32_t* next = out.next.data();
  uint32_t* head = out.head.data();
  uint32_t* tail = out.tail.data();
  uint64_t* count = out.count.data();
  uint32_t used = 0;  // chunks taken
  // Where bucket b's line starting at its pair `first` goes; a line at a
  // chunk's start first takes the arena's next chunk for the bucket. Asked
  // once per line, not per key: the per-key path only fills the line.
  const auto LineInChunk = [&](size_t b, uint64_t first) {
    if ((first & chunk_mask) == 0) {
      const uint32_t fresh = used++;
      next[fresh] = kNoChunk;
      if (first == 0) {
        head[b] = fresh;
      } else {
        next[tail[b]] = fresh;
      }
      tail[b] = fresh;
    }
    return chunks + size_t{tail[b]} * chunk_pairs_ + (first & chunk_mask);
  };
  const float* g = grads.data();
  // The per-key loop, compiled once per case: with the two tests left in
  // it, GCC kept the loop's pointers on the stack, and a 10M-key push was
  // 12% slower.
  const auto pass = [&]<bool kOneShard, bool kOneValue>() {
    constexpr size_t kBlock = 256;
    uint64_t rows[kBlock];
    for (size_t i = begin; i < end; i += kBlock) {
      const size_t m = std::min(kBlock, end - i);
      hash.GlobalRows(keys.data() + i, m, rows);
      for (size_t j = 0; j < m; ++j) {
        uint32_t row;
        const uint32_t b = at.Locate<kOneShard>(rows[j], &row);
        const uint32_t payload = kOneValue ? std::bit_cast<uint32_t>(g[i + j])
                                           : static_cast<uint32_t>(i + j);
        const uint64_t c = count[b]++;
        Pair* line = lines + size_t{b} * kLine;
        line[c % kLine] = {row, payload};
        if (c % kLine == kLine - 1) {
          StreamLine(LineInChunk(b, c - (kLine - 1)), line);
        }
      }
    }
  };
  if (at.one_shard) {
    dim_ == 1 ? pass.operator()<true, true>() : pass.operator()<true, false>();
  } else {
    dim_ == 1 ? pass.operator()<false, true>()
              : pass.operator()<false, false>();
  }
  for (size_t b = 0; b < buckets; ++b) {  // the partial last lines
    const uint64_t c = count[b];
    if (c % kLine == 0) continue;
    Pair* dst = LineInChunk(b, c - c % kLine);
    for (uint64_t k = 0; k < c % kLine; ++k) dst[k] = lines[b * kLine + k];
  }
  _mm_sfence();  // the streamed lines are visible before the pool's join
}

Status PartitionedSums::SumBuckets(std::span<const float> grads, size_t part,
                                   const RunFn& fn) {
  PartOutput& out = out_[part];
  const uint32_t dim = dim_;
  const uint32_t span_rows = 1u << shift_;
  const uint32_t mask = span_rows - 1;
  out.slice.resize(size_t{span_rows} * dim);  // zero: drained below
  out.bitmap.resize(span_rows / 64);
  // A run is handed over once it holds kRunRows rows; a bucket adds at most
  // span_rows.
  const size_t most = kRunRows + span_rows;
  if (out.rows.size() < most + kDrainSlack) out.rows.resize(most + kDrainSlack);
  if (out.values.size() < most * dim + kDrainSlack) {
    out.values.resize(most * dim + kDrainSlack);
  }
  const bool avx512 = kernels::ActiveCpuFeatures().avx512;
  float* slice = out.slice.data();
  uint64_t* bits = out.bitmap.data();
  uint32_t* rows = out.rows.data();
  float* values = out.values.data();
  size_t n = 0;  // rows of the run being filled
  const uint32_t first = part_first_bucket_[part];
  const uint32_t last = part_first_bucket_[part + 1];
  for (uint32_t b = first; b < last; ++b) {
    const uint32_t shard = bucket_shard_[b];
    bool any = false;
    // The bucket's pairs in key order: part 0's chunks, then part 1's, ...
    for (const PartOutput& from : out_) {
      uint64_t left = from.count[b];
      any = any || left > 0;
      for (uint32_t c = left > 0 ? from.head[b] : kNoChunk; left > 0;
           c = from.next[c]) {
        const uint64_t here = std::min(left, chunk_pairs_);
        left -= here;
        const Pair* p = from.chunks.data() + size_t{c} * chunk_pairs_;
        const Pair* end = p + here;
        if (dim == 1) {
          for (; p < end; ++p) {
            // The pairs were streamed past the caches: fetch 2 KiB ahead,
            // once per line (2 ms less CPU for a 10M-key push).
            if ((reinterpret_cast<uintptr_t>(p) & 63) == 0) {
              __builtin_prefetch(p + kPrefetchPairs);
            }
            const uint32_t off = p->row & mask;
            slice[off] += std::bit_cast<float>(p->payload);
            bits[off >> 6] |= uint64_t{1} << (off & 63);
          }
        } else {
          constexpr ptrdiff_t kAhead = 8;  // gradient rows are gathered
          for (; p < end; ++p) {
            if (end - p > kAhead) {
              __builtin_prefetch(grads.data() +
                                 size_t{p[kAhead].payload} * dim);
            }
            const uint32_t off = p->row & mask;
            const float* g = grads.data() + size_t{p->payload} * dim;
            float* dst = slice + size_t{off} * dim;
            for (uint32_t j = 0; j < dim; ++j) dst[j] += g[j];
            bits[off >> 6] |= uint64_t{1} << (off & 63);
          }
        }
      }
    }
    if (any) {
      // Drain the slice in row order.
      const uint32_t base = (b - bucket_base_[shard]) << shift_;  // local row
      if (dim == 1 && avx512) {
        n = DrainDim1Avx512(slice, bits, span_rows / 64, base, rows, values, n);
      } else {
        for (uint32_t w = 0; w < span_rows / 64; ++w) {
          uint64_t word = bits[w];
          if (word == 0) continue;
          bits[w] = 0;
          do {
            const uint32_t off = w * 64 + std::countr_zero(word);
            word &= word - 1;
            rows[n] = base + off;
            float* src = slice + size_t{off} * dim;
            if (dim == 1) {
              values[n] = *src;
              *src = 0.0f;
            } else {
              std::memcpy(values + n * dim, src, sizeof(float) * dim);
              std::memset(src, 0, sizeof(float) * dim);
            }
            ++n;
          } while (word != 0);
        }
      }
    }
    // Hand the run over when it is full, the shard ends or the part does.
    if (n > 0 &&
        (n >= kRunRows || b + 1 == last || bucket_shard_[b + 1] != shard)) {
      PS_RETURN_IF_ERROR(fn(part, shard, {rows, n}, {values, n * dim}));
      n = 0;
    }
  }
  return Status::OK();
}

Status PartitionedSums::Sum(const ShardRouter& router, uint32_t dim,
                            std::span<const uint64_t> keys,
                            std::span<const float> grads, SharedPool& pool,
                            const RunFn& fn) {
  Layout(router, dim);
  const size_t buckets = bucket_shard_.size();
  const size_t n = keys.size();
  parts_ = std::clamp<size_t>(n / kMinKeysPerPart, 1, pool.size());
  key_begin_.resize(parts_ + 1);
  for (size_t p = 0; p <= parts_; ++p) key_begin_[p] = n * p / parts_;
  // Chunks of about a quarter of a bucket's share of a part, so that the
  // partly filled last chunks waste little; at least a few lines.
  const uint64_t per_bucket = n / parts_ / std::max<size_t>(1, buckets);
  chunk_pairs_ = std::clamp<uint64_t>(
      std::bit_floor(std::max<uint64_t>(1, per_bucket / 4)), kMinChunkPairs,
      kMaxChunkPairs);
  out_.resize(parts_);  // SumBuckets reads every part's chains

  const Locator where{shift_, router.shards() == 1, &router,
                      bucket_base_.data()};
  pool.ForEachPart(parts_, [&](size_t p) {
    Partition(router.row_hash(), where, keys, grads, p);
  });

  // Contiguous runs of buckets with about as many pairs per part.
  part_first_bucket_.assign(parts_ + 1, static_cast<uint32_t>(buckets));
  part_first_bucket_[0] = 0;
  uint64_t before = 0;  // pairs of the buckets below b
  size_t b = 0;
  for (size_t p = 1; p < parts_; ++p) {
    while (b < buckets && before < n * p / parts_) {
      for (const PartOutput& from : out_) before += from.count[b];
      ++b;
    }
    part_first_bucket_[p] = static_cast<uint32_t>(b);
  }
  std::vector<Status> status(parts_);
  pool.ForEachPart(parts_,
                   [&](size_t p) { status[p] = SumBuckets(grads, p, fn); });
  for (const Status& s : status) PS_RETURN_IF_ERROR(s);
  return Status::OK();
}

}  // namespace ps::worker
