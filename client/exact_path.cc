#include "client/exact_path.h"

#include <cstring>
#include <unordered_map>

#include "client/push_shape.h"

namespace ps::worker {

Status ExactPath::Push(std::span<const uint64_t> keys,
                       std::span<const float> grads) {
  const uint32_t dim = spec_.dim();
  PS_RETURN_IF_ERROR(CheckPushShape(spec_, keys.size(), grads.size()));
  const uint32_t shards = servers_.size();
  std::vector<proto::ControlRequest> requests(shards);
  std::vector<std::unordered_map<uint64_t, uint32_t>> position(shards);
  for (uint32_t s = 0; s < shards; ++s) {
    auto* p = requests[s].mutable_exact_push();
    p->set_table_id(spec_.id());
    p->set_step(clock_.current());
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t s = router_.map().ShardOfKey(keys[i]);
    auto* p = requests[s].mutable_exact_push();
    auto [it, fresh] =
        position[s].try_emplace(keys[i], static_cast<uint32_t>(p->keys_size()));
    const float* g = grads.data() + i * dim;
    if (fresh) {
      p->add_keys(keys[i]);
      for (uint32_t j = 0; j < dim; ++j) p->add_values(g[j]);
    } else {
      float* v = p->mutable_values()->mutable_data() + size_t{it->second} * dim;
      for (uint32_t j = 0; j < dim; ++j) v[j] += g[j];
    }
  }
  for (uint32_t s = 0; s < shards; ++s) {
    if (requests[s].exact_push().keys_size() == 0) continue;
    PS_RETURN_IF_ERROR(servers_[s].Call(requests[s]).status());
  }
  return Status::OK();
}

Status ExactPath::Pull(std::span<const uint64_t> keys, std::span<float> out) {
  const uint32_t dim = spec_.dim();
  if (out.size() != keys.size() * dim) {
    return InvalidArgument("pull from table " + spec_.name() + ": room for " +
                           std::to_string(out.size()) + " values, need " +
                           std::to_string(keys.size() * dim));
  }
  const uint32_t shards = servers_.size();
  std::vector<proto::ControlRequest> requests(shards);
  std::vector<std::vector<size_t>> origin(shards);
  for (uint32_t s = 0; s < shards; ++s) {
    requests[s].mutable_exact_pull()->set_table_id(spec_.id());
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t s = router_.map().ShardOfKey(keys[i]);
    requests[s].mutable_exact_pull()->add_keys(keys[i]);
    origin[s].push_back(i);
  }
  for (uint32_t s = 0; s < shards; ++s) {
    if (origin[s].empty()) continue;
    PS_ASSIGN_OR_RETURN(proto::ControlReply reply,
                        servers_[s].Call(requests[s]));
    const auto& values = reply.exact_pull().values();
    if (static_cast<size_t>(values.size()) != origin[s].size() * dim) {
      return Corruption(servers_[s].name() + " answered an exact pull of " +
                        std::to_string(origin[s].size()) + " keys with " +
                        std::to_string(values.size()) + " values");
    }
    for (size_t j = 0; j < origin[s].size(); ++j) {
      std::memcpy(out.data() + origin[s][j] * dim, values.data() + j * dim,
                  sizeof(float) * dim);
    }
  }
  return Status::OK();
}

}  // namespace ps::worker
