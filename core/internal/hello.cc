#include "core/internal/hello.h"

#include <unistd.h>

#include <fstream>

#include "net/transfer.h"

namespace ps::xfer::internal {

using net::Deadline;

Status RecvMessage(int fd, google::protobuf::MessageLite* message,
                   Deadline deadline) {
  FrameReader reader;
  for (;;) {
    PS_ASSIGN_OR_RETURN(bool readable, net::WaitReadable(fd, deadline));
    if (!readable) {
      return Timeout(message->GetTypeName() + ": not whole at the deadline");
    }
    bool complete = false;
    PS_RETURN_IF_ERROR(reader.Read(fd, &complete));
    if (complete) return reader.Parse(message);
  }
}

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
    PS_ASSIGN_OR_RETURN(size_t n, net::RecvSome(fd, into, want, "hello"));
    if (length_have_ < sizeof(length_bytes_)) {
      length_have_ += n;
      if (length_have_ == sizeof(length_bytes_)) {
        const uint32_t length =
            uint32_t{length_bytes_[0]} | uint32_t{length_bytes_[1]} << 8 |
            uint32_t{length_bytes_[2]} << 16 | uint32_t{length_bytes_[3]} << 24;
        if (length > kMaxHelloBytes) {
          return InvalidArgument("hello of " + std::to_string(length) +
                                 " bytes is too large: not an xfer peer?");
        }
        body_.assign(length, '\0');  // at most kMaxHelloBytes
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

std::string HostIdentity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return boot_id + "/" + host;
}

}  // namespace ps::xfer::internal
