#include "core/hello.h"

#include <unistd.h>

#include <fstream>

#include "core/socket.h"

namespace ps::xfer::internal {

Status SendMessage(int fd, const google::protobuf::MessageLite& message) {
  std::string bytes;
  if (!message.SerializeToString(&bytes)) {
    return Internal("cannot serialize " + message.GetTypeName());
  }
  uint32_t length = static_cast<uint32_t>(bytes.size());
  bytes.insert(0, reinterpret_cast<const char*>(&length), sizeof(length));
  return SendAll(fd, bytes.data(), bytes.size());
}

Status RecvMessage(int fd, google::protobuf::MessageLite* message) {
  uint32_t length = 0;
  PS_RETURN_IF_ERROR(RecvAll(fd, &length, sizeof(length)));
  if (length > kMaxHelloBytes) {
    return InvalidArgument("hello of " + std::to_string(length) +
                           " bytes is too large: not an xfer peer?");
  }
  std::string bytes(length, '\0');
  PS_RETURN_IF_ERROR(RecvAll(fd, bytes.data(), length));
  if (!message->ParseFromString(bytes)) {
    return InvalidArgument("malformed " + message->GetTypeName());
  }
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
