#include "core/hello.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace ps::xfer::internal {

Status SendMessage(int fd, const google::protobuf::MessageLite& message,
                   Deadline deadline) {
  // The length prefix first, then the message appended behind it: one
  // buffer, one send, no copy of the message.
  std::string bytes(sizeof(uint32_t), '\0');
  if (!message.AppendToString(&bytes)) {
    return Internal("cannot serialize " + message.GetTypeName());
  }
  const uint32_t length = static_cast<uint32_t>(bytes.size() - sizeof(length));
  std::memcpy(bytes.data(), &length, sizeof(length));
  return SendAllBefore(fd, bytes.data(), bytes.size(), deadline,
                       message.GetTypeName());
}

Status RecvMessage(int fd, google::protobuf::MessageLite* message,
                   Deadline deadline) {
  FrameReader reader;
  for (;;) {
    PS_ASSIGN_OR_RETURN(bool readable, WaitReadable(fd, deadline));
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
    ssize_t n = recv(fd, into, want, MSG_DONTWAIT);
    if (n == 0) return PeerLost("the peer closed the connection");
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::OK();
      return ErrnoStatus(StatusCode::kNetwork, "recv", errno);
    }
    if (length_have_ < sizeof(length_bytes_)) {
      length_have_ += static_cast<size_t>(n);
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
      body_have_ += static_cast<size_t>(n);
    }
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
