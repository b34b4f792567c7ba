#include "core/batch.h"

namespace ps::xfer {

void Batch::Put(const void* src, size_t length, const RemoteRegion& dst,
                uint64_t offset) {
  internal::Op op;
  op.type = internal::OpType::kPut;
  op.remote = &dst;
  op.single = Segment{const_cast<void*>(src), offset, length};
  ops_.push_back(op);
}

void Batch::Get(void* dst, size_t length, const RemoteRegion& src,
                uint64_t offset) {
  internal::Op op;
  op.type = internal::OpType::kGet;
  op.remote = &src;
  op.single = Segment{dst, offset, length};
  ops_.push_back(op);
}

void Batch::FetchAdd64(const RemoteRegion& dst, uint64_t offset, uint64_t value,
                       uint64_t* previous) {
  internal::Op op;
  op.type = internal::OpType::kFetchAdd;
  op.remote = &dst;
  op.single = Segment{nullptr, offset, 8};
  op.operand0 = value;
  op.result = previous;
  ops_.push_back(op);
}

}  // namespace ps::xfer
