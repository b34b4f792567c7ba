// RowIndex: an ExactPartition's map from key to row in 4 bytes a slot.
// Open addressing with linear probing over a power-of-two array kept at
// most max_load_percent full, counting tombstones. A deletion leaves a
// tombstone (or an empty slot, where the next one is empty), which an
// insert whose probe passes it takes: shifting the entries behind it back,
// as KeyIndex does, would read the key of each shifted entry from its row
// (a cache miss apiece). An insert that finds a quarter of the counted
// slots tombstones re-files the entries in an array of the same size
// instead of doubling.
//
// Unlike KeyIndex (table/key_index.h: 12-byte slots that hold their keys),
// a slot holds only its row and 6 bits of its key's hash (a fingerprint):
// the owner keeps each row's key beside the row's other fields and hands
// the index a RowKeys view of them, and a probe reads a row's key only
// where the fingerprint matches (1 in 64 of the others).
// That is what keeps a partition's bytes per row small: kept 70-90% full
// (half that after a doubling), these cost ~7 bytes a row where 12-byte
// slots at 55-75% cost ~27, while a lookup of a key that has a row reads
// its key from the row's record, which an update reads anyway.
//
// As in KeyIndex, the hash's high bits (below the owner's) pick the home
// slot, so slots lie in hash order and keys that come in hash order read
// the array from one end to the other. Growing doubles the array and
// re-files every entry, reading each one's key (prefetched ahead); the
// caller is stopped meanwhile (hence one index per partition), but need
// not wait for the new array's memory: that can be made ahead of time
// (SpareWanted, AdoptSpare).
//
// Rows are below kMaxRows (2^26 - 1): 4.3 billion rows over a table's 64
// partitions. Insert refuses more.
//
// Not thread-safe: the partition holds it under its own lock.
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/huge_pages.h"
#include "protocol/key_hash.h"

namespace ps::table {

// Where the owner keeps each row's key: row r's key is first[r * stride].
struct RowKeys {
  const uint64_t* first = nullptr;
  size_t stride = 1;  // in uint64_t
  const uint64_t* at(uint32_t row) const { return first + row * stride; }
  uint64_t of(uint32_t row) const { return *at(row); }
};

class RowIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr int kRowBits = 26;
  static constexpr uint32_t kMaxRows = (uint32_t{1} << kRowBits) - 1;

  // Grows (doubles) when an insert would fill more than max_load_percent
  // (in [50, 90]) of the slots, tombstones counted (or, when a quarter of
  // those are tombstones, re-files the entries in as many slots).
  // `owner_bits` (< 32): the top bits of the hash that the owner picks this
  // index by (ExactTable's partition).
  explicit RowIndex(uint32_t max_load_percent = 70, int owner_bits = 0)
      : max_load_percent_(max_load_percent), owner_bits_(owner_bits) {}

  static uint64_t Mix(uint64_t k) { return protocol::KeyHash(k); }

  // The row of `key` (whose Mix is `hash`), or kNone.
  uint32_t Find(uint64_t key, uint64_t hash, RowKeys keys) const {
    if (slots_.empty()) return kNone;
    return FindFrom(HomeOf(hash), key, Fingerprint(hash), keys);
  }
  // The same, for keys that come in hash order (a stream through the
  // array): four slots a step. A probe's length varies from key to key (1
  // to ~4 slots at these loads), and a loop of one slot a step mispredicted
  // its exit about once a key; in fours it mostly runs once. 10M lookups
  // in hash order took 9.8-10.1 ns a key instead of 12.9-13.0, applies
  // 15.2-15.5 instead of 16.2-16.4 (one thread, in process). Keys in no
  // order keep Find: only their home slot's line is fetched ahead
  // (Prefetch), and four slots that run into the next line waited for it
  // (random lookups 11% slower).
  uint32_t FindInOrder(uint64_t key, uint64_t hash, RowKeys keys) const {
    if (slots_.empty()) return kNone;
    const uint32_t fp = Fingerprint(hash);
    size_t i = HomeOf(hash);
#if defined(__SSE2__)
    for (; i + kQuad <= slots_.size(); i = (i + kQuad) & mask_) {
      const Quad q = ProbeQuad(i, fp);
      for (unsigned m = q.matches; m != 0; m &= m - 1) {
        const uint32_t row = RowOf(slots_[i + std::countr_zero(m)]);
        if (keys.of(row) == key) return row;
      }
      if (q.ends) return kNone;
    }
#endif
    return FindFrom(i, key, fp, keys);
  }
  // Files `row` (< kMaxRows) under `hash`, whose key has no row here.
  // False when the array cannot grow (no memory) or row is too large:
  // nothing changed then. `keys` must give the key of every row filed
  // before (a growth re-files them).
  bool Insert(uint64_t hash, uint32_t row, RowKeys keys);
  // Forgets `key`; absent: nothing.
  void Erase(uint64_t key, uint64_t hash, RowKeys keys);
  // Before `n` inserts of new keys whose hashes all lie in [low, high]
  // (a sorted run of a push in hash order): grows the array at once so
  // that the slots of that range hold what they hold now and the new keys
  // within the load bound, at most to room for `most` keys. False when it
  // could not grow (nothing changed; the inserts still work).
  //
  // Linear probing fills a range past its slots when the keys homed there
  // outnumber them, whatever the array's load elsewhere; each insert and
  // each lookup of a new key then probes to the end of one long stretch.
  // So the first runs of a large push into a small index would, and so
  // would a push of as many new keys again into an index half full (a
  // second sweep of the hashes; or any push at a table's memory bound,
  // whose freed rows lie anywhere): measured, 0.1 M keys/s, tens of
  // thousands of probes a key, where the range's fill was not counted.
  bool ReserveForRange(size_t n, uint64_t low, uint64_t high, size_t most,
                       RowKeys keys);

  // Asks the CPU to load the home slot of a key: loops over many keys
  // call it kPrefetchAhead keys ahead, so that the misses overlap.
  static constexpr size_t kPrefetchAhead = 16;
  void Prefetch(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[HomeOf(hash)]);
  }
  // Once the home slot is in cache (Prefetch, some keys earlier): asks
  // for the key of the first row whose fingerprint matches, which Find
  // will read.
  void PrefetchKey(uint64_t hash, RowKeys keys) const {
    if (slots_.empty()) return;
    const uint32_t fp = Fingerprint(hash);
    for (size_t i = HomeOf(hash);; i = (i + 1) & mask_) {
      const uint32_t s = slots_[i];
      if (s == kEmpty) return;
      if ((s >> kRowBits) == fp && s != kTombstone) {
        const uint64_t* key = keys.at(RowOf(s));
        __builtin_prefetch(key);
        // The loop's one effect is this prefetch, which the compiler may
        // take for none: without an asm that takes the address, GCC 12
        // dropped the whole loop, and lookups of keys in no order stalled
        // on every key's record (83% of ReadRange's samples, 75% of
        // Apply's).
        asm volatile("" : : "r"(key));
        return;
      }
    }
  }

  // The array of slots, on huge pages (base/huge_pages.h): a lookup of
  // keys in no order reads a random slot.
  using Slots = std::vector<uint32_t, HugePageAllocator<uint32_t>>;

  // Growing allocates a new array and writes every slot of it, under the
  // owner's lock. Fresh memory is costly there: on this project's VM a
  // fresh 2 MiB huge page took ~10 ms to fault in, and the rebuild of a
  // 2 MiB array 17 ms on average (2 ms for a 1 MiB one on 4 KiB pages),
  // which stalled pushes of new keys for as long. So the owner may have
  // the next array made ahead, off its lock (table/index_spares.h):
  //
  // The slots of the growth that inserts filling `lead_percent` more of
  // the slots would bring about (Insert's rule: the same size without the
  // tombstones, or double), when the array is that close to it and holds
  // no spare of that size; else 0.
  size_t SpareWanted(uint32_t lead_percent) const;
  // Keeps `spare` (from EmptySlots) for the growth to its size, which then
  // re-files the entries there instead of allocating; an empty one, or one
  // no growth can use any more (no larger than the array), is dropped.
  void AdoptSpare(Slots spare);
  // `n` empty slots (every page written); empty without memory.
  static Slots EmptySlots(size_t n);

  bool has_spare() const { return !spare_.empty(); }
  // Where the slots lie (tests check which array a growth took).
  const uint32_t* array() const { return slots_.data(); }

  size_t size() const { return size_; }
  size_t bytes() const {
    return (slots_.capacity() + spare_.capacity()) * sizeof(uint32_t);
  }

 private:
  // A slot: fingerprint << kRowBits | (row + 1); 0 is empty, and
  // kTombstone (row + 1 of 0 under a fingerprint of 1) a deleted entry.
  static constexpr uint32_t kEmpty = 0;
  static constexpr uint32_t kTombstone = uint32_t{1} << kRowBits;
  static uint32_t Fingerprint(uint64_t hash) {
    return static_cast<uint32_t>(hash) & ((1u << (32 - kRowBits)) - 1);
  }
  static uint32_t RowOf(uint32_t slot) {
    return (slot & ((1u << kRowBits) - 1)) - 1;
  }
  size_t HomeOf(uint64_t hash) const {
    return (hash << owner_bits_) >> home_shift_;
  }
  // Find's probe from slot i on, one slot a step.
  uint32_t FindFrom(size_t i, uint64_t key, uint32_t fp, RowKeys keys) const {
    for (;; i = (i + 1) & mask_) {
      const uint32_t s = slots_[i];
      if (s == kEmpty) return kNone;
      if ((s >> kRowBits) == fp && s != kTombstone &&
          keys.of(RowOf(s)) == key) {
        return RowOf(s);
      }
    }
  }
#if defined(__SSE2__)
  static constexpr size_t kQuad = 4;
  struct Quad {
    unsigned matches;  // a bit per slot of fp before the first empty one
    bool ends;         // one of the four is empty: the probe ends there
  };
  // The four slots from i (i + kQuad <= slots_.size()).
  Quad ProbeQuad(size_t i, uint32_t fp) const {
    const __m128i v =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(slots_.data() + i));
    const unsigned empties = static_cast<unsigned>(_mm_movemask_ps(
        _mm_castsi128_ps(_mm_cmpeq_epi32(v, _mm_setzero_si128()))));
    const __m128i fps = _mm_cmpeq_epi32(_mm_srli_epi32(v, kRowBits),
                                        _mm_set1_epi32(static_cast<int>(fp)));
    const __m128i tombstones =
        _mm_cmpeq_epi32(v, _mm_set1_epi32(static_cast<int>(kTombstone)));
    const unsigned matches = static_cast<unsigned>(
        _mm_movemask_ps(_mm_castsi128_ps(_mm_andnot_si128(tombstones, fps))));
    // The slots before the first empty one (all four without one).
    const unsigned before = (empties & (0u - empties)) - 1;
    return {matches & before, empties != 0};
  }
#endif
  // The share of the slots homed in [low, high] that are not empty (an
  // entry or a tombstone), from at most kFillSamples of them evenly spaced.
  static constexpr size_t kFillSamples = 256;
  double FilledShare(uint64_t low, uint64_t high) const;
  // Re-files the entries in an array of `slots` (a power of two with room
  // for them within the load bound), without tombstones; false without
  // memory.
  bool Rebuild(size_t slots, RowKeys keys);
  // The size Insert re-files into when the next insert finds the array
  // full: the same without the tombstones when the entries then fill at
  // most 3/4 of the bound (a quarter of it was tombstones), else double.
  size_t GrowthSlots() const;
  // Whether a growth may still take a spare of `n` slots: a larger array,
  // or the next growth's size (a re-file at this size).
  bool SpareUsable(size_t n) const;

  uint32_t max_load_percent_;
  int owner_bits_;
  Slots slots_;
  Slots spare_;          // AdoptSpare's, or empty
  size_t mask_ = 0;      // slots_.size() - 1
  int home_shift_ = 64;  // 64 - log2(slots_.size())
  size_t size_ = 0;
  size_t tombstones_ = 0;
};

}  // namespace ps::table
