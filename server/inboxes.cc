#include "server/inboxes.h"

#include <string>

namespace ps::server {

StatusOr<std::unique_ptr<Inboxes>> Inboxes::Create(xfer::Context* context,
                                                   uint32_t workers,
                                                   uint32_t slots,
                                                   uint32_t slot_bytes,
                                                   bool lookups) {
  if (workers == 0 || workers > 65536) {
    return InvalidArgument("number of workers must be in [1, 65536], not " +
                           std::to_string(workers));
  }
  if (slots == 0 || slots > 65536) {
    return InvalidArgument("inbox slots must be in [1, 65536], not " +
                           std::to_string(slots));
  }
  constexpr uint32_t kMinSlotBytes = 256;
  if (slot_bytes % 64 != 0 || slot_bytes < kMinSlotBytes ||
      slot_bytes > (1u << 30)) {
    return InvalidArgument(
        "slot bytes must be a multiple of 64 in [256, 2^30], not " +
        std::to_string(slot_bytes));
  }
  std::unique_ptr<Inboxes> in(new Inboxes);
  in->context_ = context;
  in->words_.workers = workers;
  in->slots_ = slots;
  in->slot_bytes_ = slot_bytes;
  const uint64_t inbox_bytes = uint64_t{slots} * slot_bytes;
  for (uint32_t w = 0; w < workers; ++w) {
    auto r = context->Allocate(inbox_bytes,
                               xfer::kRemoteWrite | xfer::kNotifyEvents);
    if (!r.ok()) {
      return ResourceExhausted(
          "cannot allocate the inbox of worker " + std::to_string(w) + " (" +
          std::to_string(inbox_bytes) + " bytes): " + r.status().ToString());
    }
    in->inbox_regions_.push_back(std::move(*r));
    if (!lookups) continue;
    auto reply = context->Allocate(inbox_bytes, xfer::kRemoteRead);
    if (!reply.ok()) {
      return ResourceExhausted("cannot allocate the lookup replies of worker " +
                               std::to_string(w) + " (" +
                               std::to_string(inbox_bytes) +
                               " bytes): " + reply.status().ToString());
    }
    in->reply_regions_.push_back(std::move(*reply));
  }
  auto s = context->Allocate(in->words_.Bytes(), xfer::kRemoteAll);
  if (!s.ok()) {
    return ResourceExhausted("cannot allocate the status words: " +
                             s.status().ToString());
  }
  in->status_region_ = std::move(*s);
  return in;
}

}  // namespace ps::server
