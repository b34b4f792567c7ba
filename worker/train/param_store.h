// ParamStore: the trainer's view of a model's parameters, wherever they live.
// A model asks for rows of a sparse table by key (Pull), hands back summed
// gradients per key (Push), reads and updates a dense table whole
// (PullDense / PushDense), and ends its step (EndStep, the server clock).
//
// Two implementations share these semantics exactly:
//   LocalParamStore (local_param_store.h): the tables in this process, laid
//     out, initialized and updated the way one ps_server shard does it; for
//     --local runs and tests.
//   PsParamStore (ps_param_store.h): the same calls over PsClient to the
//     parameter servers.
//
// Thread-safe: a trainer's threads Pull and Push concurrently. EndStep,
// Flush and Barrier are called by one thread at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include "protocol/ps.pb.h"

namespace ps::train {

class ParamStore {
 public:
  virtual ~ParamStore() = default;

  // The table called `name`, or null.
  virtual const proto::TableSpec* table(const std::string& name) const = 0;

  // Reads the keys' rows into out (keys.size() x dim floats).
  virtual Status Pull(uint32_t table_id, std::span<const uint64_t> keys,
                      std::span<float> out) = 0;
  // Applies grads (keys.size() x dim) through the table's optimizer;
  // duplicate keys are summed first.
  virtual Status Push(uint32_t table_id, std::span<const uint64_t> keys,
                      std::span<const float> grads) = 0;
  // DENSE tables, whole (capacity x dim floats).
  virtual Status PullDense(uint32_t table_id, std::span<float> out) = 0;
  virtual Status PushDense(uint32_t table_id, std::span<const float> grads) = 0;

  // Ends this worker's step (the servers' consistency model applies).
  virtual Status EndStep() = 0;
  // Returns once every push made so far is applied.
  virtual Status Flush() = 0;
  // Returns once every worker reached the same barrier.
  virtual Status Barrier() = 0;
};

}  // namespace ps::train
