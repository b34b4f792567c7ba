// PsParamStore: ParamStore over PsClient, the parameters on the servers.
// EndStep is PsClient::Clock, Flush is WaitApplied.
#pragma once

#include <memory>

#include "client/ps_client.h"
#include "worker/train/param_store.h"

namespace ps::train {

class PsParamStore : public ParamStore {
 public:
  explicit PsParamStore(std::unique_ptr<worker::PsClient> client)
      : client_(std::move(client)) {}

  const proto::TableSpec* table(const std::string& name) const override {
    return client_->table(name);
  }
  Status Pull(uint32_t table_id, std::span<const uint64_t> keys,
              std::span<float> out) override {
    return client_->Pull(table_id, keys, out);
  }
  Status Push(uint32_t table_id, std::span<const uint64_t> keys,
              std::span<const float> grads) override {
    return client_->Push(table_id, keys, grads);
  }
  Status PullDense(uint32_t table_id, std::span<float> out) override {
    return client_->PullDense(table_id, out);
  }
  Status PushDense(uint32_t table_id, std::span<const float> grads) override {
    return client_->PushDense(table_id, grads);
  }
  Status EndStep() override { return client_->Clock().status(); }
  Status Flush() override { return client_->WaitApplied(); }
  Status Barrier() override { return client_->Barrier(); }

  worker::PsClient* client() { return client_.get(); }

 private:
  std::unique_ptr<worker::PsClient> client_;
};

}  // namespace ps::train
