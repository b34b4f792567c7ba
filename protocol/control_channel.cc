#include "protocol/control_channel.h"

namespace ps::protocol {

using xfer::internal::RecvAll;
using xfer::internal::SendAll;

Status SendControlMessage(int fd, const google::protobuf::MessageLite& m) {
  std::string bytes;
  if (!m.SerializeToString(&bytes)) {
    return Internal("cannot serialize " + m.GetTypeName());
  }
  if (bytes.size() > kMaxControlMessageBytes) {
    return InvalidArgument(m.GetTypeName() + " of " +
                           std::to_string(bytes.size()) +
                           " bytes exceeds the control message limit");
  }
  uint32_t length = static_cast<uint32_t>(bytes.size());
  PS_RETURN_IF_ERROR(SendAll(fd, &length, sizeof(length)));
  return SendAll(fd, bytes.data(), bytes.size());
}

Status RecvControlMessage(int fd, google::protobuf::MessageLite* m) {
  uint32_t length = 0;
  PS_RETURN_IF_ERROR(RecvAll(fd, &length, sizeof(length)));
  if (length > kMaxControlMessageBytes) {
    return Corruption("control message of " + std::to_string(length) +
                      " bytes exceeds the limit: not a ps peer?");
  }
  std::string bytes(length, '\0');
  PS_RETURN_IF_ERROR(RecvAll(fd, bytes.data(), length));
  if (!m->ParseFromString(bytes)) {
    return Corruption("malformed " + m->GetTypeName());
  }
  return Status::OK();
}

StatusOr<ControlClient> ControlClient::Connect(const std::string& address,
                                               int timeout_ms) {
  PS_ASSIGN_OR_RETURN(auto fd, xfer::internal::ConnectTcp(address, timeout_ms));
  ControlClient client;
  client.fd_ = std::move(fd);
  client.address_ = address;
  return client;
}

StatusOr<proto::ControlReply> ControlClient::Call(
    const proto::ControlRequest& request) {
  Status s = SendControlMessage(fd_.get(), request);
  if (!s.ok()) return s.WithContext("server " + address_);
  proto::ControlReply reply;
  s = RecvControlMessage(fd_.get(), &reply);
  if (!s.ok()) return s.WithContext("server " + address_);
  if (!reply.error().empty()) {
    return InvalidArgument("server " + address_ + ": " + reply.error());
  }
  return reply;
}

}  // namespace ps::protocol
