// Sparse gradients applied to a table in GPU memory: the device side of
// "sum", SGD and the optimizers of kernels/optimizers.h (Momentum, Adagrad,
// Adam with a global step, FTRL), element for element the same formulas.
//
//   sum / SGD   table[row] += scale * g with atomicAdd (scale 1 or -lr):
//               lock-free, rows may repeat within a packet and any number of
//               streams and host threads may add into one table at once.
//   stateful    parameters and state change together, so each (row, column)
//               must be updated by one thread, and a row that repeats in a
//               packet takes its gradients one after the other, in packet
//               order (the CPU semantics: each occurrence is its own step).
//               How: the host groups the packet by row before upload
//               (GroupRows: a stable sort of packet indices by row), and the
//               kernel gives each group a set of threads, one per column,
//               that walks the group's entries in order, keeping w and the
//               state in registers. A packet whose rows are all distinct
//               needs no grouping (order/starts null: each entry its own
//               group), which is also what a device-resident packet of
//               distinct rows uses.
//
// Bounds: CheckRows (host) gives kOutOfRange naming the first bad index
// before anything is uploaded, so a bad packet leaves the table untouched.
// The kernels also skip any row >= num_rows instead of writing past the
// table, so a caller that forgot the check cannot corrupt device memory.
//
// Streams: the Launch functions only enqueue work on the caller's
// cudaStream_t, passed as void* so this header needs no CUDA headers
// (nullptr: the legacy default stream). They return the launch error, if
// any; errors of the kernel itself show at the caller's next synchronize.
// All pointers in DeviceTable and the packet arrays point into device memory
// of the current device.
//
// Guard: the Launch functions take an optional guard word in device memory
// that earlier work on the same stream writes (the packet decoder of
// device_decoder.h: its validation result). When `guard` is non-null the
// kernel touches no row unless the word reads kApplyGuardClear, so a packet
// the device found invalid changes nothing, without a round trip to the
// host between decode and apply. nullptr: no guard (rows checked on the
// host, as Apply does).
//
// Thread-safety: the Launch functions keep no state; concurrent launches on
// one table are safe for the add (atomics) and must not overlap for the
// stateful optimizers (the caller serializes them, as ParamTable does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/optimizers.h"

namespace ps::kernels::gpu {

// A table in device memory: num_rows x dim parameters, row-major, and the
// optimizer's state arrays shaped alike (StateFloatsPerParameter of them).
struct DeviceTable {
  float* params = nullptr;
  float* state[kMaxOptimizerStates] = {nullptr, nullptr};
  uint64_t num_rows = 0;
  uint32_t dim = 0;
};

// The guard word's value that lets the kernels run (all ones).
inline constexpr uint64_t kApplyGuardClear = ~uint64_t{0};

// kOutOfRange naming the first i with rows[i] >= num_rows; OK otherwise.
Status CheckRows(std::span<const uint32_t> rows, uint64_t num_rows);

// Groups a packet by row for the stateful kernels: order holds the packet
// indices sorted by row, packet order kept within a row; starts holds
// groups + 1 offsets into order (group g is order[starts[g] ..
// starts[g + 1])). Returns false, leaving both empty, when every row is
// distinct (no grouping needed). Rows must fit in uint32 indices
// (rows.size() < 2^32).
bool GroupRows(std::span<const uint32_t> rows, std::vector<uint32_t>* order,
               std::vector<uint32_t>* starts);

// Enqueues table[rows[i]] += scale * grads[i * dim ..+dim) for i < count,
// with atomicAdd. `scale` 1 is "sum" (exact: 1 * g == g), -lr is SGD.
// `guard`: see above.
Status LaunchAddRows(DeviceTable table, const uint32_t* rows,
                     const float* grads, size_t count, float scale,
                     void* stream, const uint64_t* guard = nullptr);

// Enqueues one step of `config` (validated) for the packet rows/grads
// (count entries, device memory). order/starts/groups as GroupRows made
// them, uploaded; order == nullptr and starts == nullptr when the rows are
// distinct (groups is then count). SGD runs LaunchAddRows. `step` is the
// 1-based global step (Adam); InvalidArgument for step 0 with Adam or a
// missing state array. `guard`: see above.
Status LaunchOptimizerRows(const OptimizerConfig& config, uint64_t step,
                           DeviceTable table, const uint32_t* rows,
                           const float* grads, size_t count,
                           const uint32_t* order, const uint32_t* starts,
                           size_t groups, void* stream,
                           const uint64_t* guard = nullptr);

}  // namespace ps::kernels::gpu
