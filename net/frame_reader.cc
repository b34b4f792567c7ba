#include "net/frame_reader.h"

#include "net/transfer.h"

namespace ps::net {

Status FrameReader::Read(int fd, bool* complete) {
  *complete = false;
  for (;;) {
    char* into;
    size_t want;
    if (length_have_ < sizeof(length_bytes_)) {
      into = reinterpret_cast<char*>(length_bytes_) + length_have_;
      want = sizeof(length_bytes_) - length_have_;
    } else {
      if (body_have_ == body_.size()) {
        *complete = true;
        return Status::OK();
      }
      into = body_.data() + body_have_;
      want = body_.size() - body_have_;
    }
    PS_ASSIGN_OR_RETURN(size_t n, RecvSome(fd, into, want, what_));
    if (length_have_ < sizeof(length_bytes_)) {
      length_have_ += n;
      if (length_have_ == sizeof(length_bytes_)) {
        const uint32_t length =
            uint32_t{length_bytes_[0]} | uint32_t{length_bytes_[1]} << 8 |
            uint32_t{length_bytes_[2]} << 16 | uint32_t{length_bytes_[3]} << 24;
        if (length > max_bytes_) {
          return InvalidArgument(what_ + " of " + std::to_string(length) +
                                 " bytes is over the limit of " +
                                 std::to_string(max_bytes_) +
                                 ": not a peer of ours?");
        }
        body_.assign(length, '\0');  // at most max_bytes_
        body_have_ = 0;
      }
    } else {
      body_have_ += n;
    }
    if (n < want) return Status::OK();  // the rest has not come yet
  }
}

Status FrameReader::Parse(google::protobuf::MessageLite* message) {
  const bool ok = message->ParseFromString(body_);
  length_have_ = 0;
  body_.clear();
  body_have_ = 0;
  if (!ok) return InvalidArgument("malformed " + message->GetTypeName());
  return Status::OK();
}

}  // namespace ps::net
