#include "core/internal/hello.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "core/auth.h"
#include "net/transfer.h"

namespace ps::xfer::internal {

using net::Deadline;

Status RecvMessage(int fd, google::protobuf::MessageLite* message,
                   Deadline deadline) {
  net::FrameReader reader("hello", kMaxHelloBytes);
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

proto::Hello MakeHello(const HelloIdentity& me) {
  proto::Hello hello;
  hello.set_name(me.name);
  hello.set_instance(me.instance);
  hello.set_host_id(me.host_id);
  hello.set_pid(static_cast<uint32_t>(getpid()));
  if (!me.secret.empty()) hello.set_auth_nonce(NewNonce());
  return hello;
}

StatusOr<proto::HelloReply> Handshake(const HelloIdentity& me, int fd,
                                      const proto::Hello& hello,
                                      const std::string& address,
                                      net::Deadline deadline) {
  auto fail = [&address](const Status& s) {
    return s.WithContext("hello with " + address);
  };
  // The listener says why it refuses, with a status code (unauthenticated
  // for a missing or wrong proof).
  auto refused = [&address](const proto::HelloReply& r) {
    const bool known = r.error_code() > 0 &&
                       r.error_code() <= static_cast<uint32_t>(kLastStatusCode);
    return Status(
        known ? static_cast<StatusCode>(r.error_code()) : StatusCode::kNetwork,
        address + " refused the connection: " + r.error());
  };
  Status s = SendMessage(fd, hello, deadline);
  if (!s.ok()) return fail(s);
  proto::HelloReply reply;
  s = RecvMessage(fd, &reply, deadline);
  if (!s.ok()) return fail(s);
  if (!reply.error().empty()) return refused(reply);
  const bool challenged = !reply.auth_nonce().empty();
  if (me.secret.empty()) {
    if (challenged) {
      return Unauthenticated(
          reply.name() + " at " + address +
          " requires the cluster secret, and " + me.name +
          " has none (--cluster_secret_file or $PS_CLUSTER_SECRET_FILE)");
    }
    return reply;
  }
  if (!challenged) {
    return Unauthenticated(reply.name() + " at " + address +
                           " does not authenticate (it has no cluster "
                           "secret): " +
                           me.name + " will not trust it");
  }
  if (!me.secret.Verify(kXferAuthProtocol, AuthRole::kAcceptor,
                        reply.auth_nonce(), hello.auth_nonce(),
                        reply.auth_proof())) {
    return Unauthenticated(reply.name() + " at " + address +
                           " failed to prove the cluster secret (a "
                           "different secret?)");
  }
  proto::AuthProof proof;
  proof.set_proof(me.secret.Prove(kXferAuthProtocol, AuthRole::kConnector,
                                  reply.auth_nonce(), hello.auth_nonce()));
  s = SendMessage(fd, proof, deadline);
  if (!s.ok()) return fail(s);
  reply.Clear();
  s = RecvMessage(fd, &reply, deadline);
  if (!s.ok()) return fail(s);
  if (!reply.error().empty()) return refused(reply);
  return reply;
}

std::string HostIdentity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  // Abstract Unix sockets belong to the network namespace, and System V IPC
  // and POSIX shm to the IPC namespace: containers and pods on one kernel
  // are different "hosts" for the same-host transport.
  auto ns = [](const char* which) {
    struct stat st {};
    const std::string path = std::string("/proc/self/ns/") + which;
    if (stat(path.c_str(), &st) != 0) return std::string("?");
    return std::to_string(static_cast<unsigned long long>(st.st_ino));
  };
  return boot_id + "/" + host + "/net:" + ns("net") + "/ipc:" + ns("ipc");
}

}  // namespace ps::xfer::internal
