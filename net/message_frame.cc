#include "net/message_frame.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "net/transfer.h"

namespace ps::net {

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

}  // namespace ps::net
