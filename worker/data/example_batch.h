// ExampleBatch: training examples in compressed-row form, the shape every
// reader produces and every model consumes. Example i has label labels[i] and
// features [offsets[i], offsets[i+1]) of ids/values/fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ps::data {

struct ExampleBatch {
  std::vector<float> labels;  // 0 or 1
  std::vector<uint32_t> offsets{0};
  std::vector<uint64_t> ids;     // hashed feature ids
  std::vector<float> values;     // feature values (1 for one-hot)
  std::vector<uint32_t> fields;  // field of each feature (FM/FFM, DeepFM)

  size_t size() const { return labels.size(); }
  bool empty() const { return labels.empty(); }
  void Clear() {
    labels.clear();
    offsets.assign(1, 0);
    ids.clear();
    values.clear();
    fields.clear();
  }
  void AddFeature(uint64_t id, float value, uint32_t field) {
    ids.push_back(id);
    values.push_back(value);
    fields.push_back(field);
  }
  // Closes the example whose features were added since the last call.
  void EndExample(float label) {
    labels.push_back(label);
    offsets.push_back(static_cast<uint32_t>(ids.size()));
  }
  // Drops features added since the last EndExample (a malformed line).
  void AbandonExample() {
    size_t keep = offsets.back();
    ids.resize(keep);
    values.resize(keep);
    fields.resize(keep);
  }
};

}  // namespace ps::data
