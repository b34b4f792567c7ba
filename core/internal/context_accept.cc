// The listener's side of the hello (internal/context_impl.h): every provider
// answers in turn, and the first that takes the connection serves it.
#include <unistd.h>

#include "core/internal/context_impl.h"

namespace ps::xfer::internal {

HelloAcceptor::Answer ContextImpl::AnswerHello(const proto::Hello& hello,
                                               bool same_host_socket) {
  HelloAcceptor::Answer answer;
  proto::HelloReply& reply = answer.reply;
  reply.set_name(options_.name);
  reply.set_instance(instance_);
  reply.set_host_id(host_id_);
  reply.set_pid(static_cast<uint32_t>(getpid()));
  for (const proto::TransportOffer& offer : hello.offers()) {
    if (FindProvider(offer.provider()) != nullptr) continue;
    proto::TransportAnswer* a = reply.add_answers();
    a->set_provider(offer.provider());
    a->set_declined(options_.name + " was built without " + offer.name());
  }
  for (const auto& p : providers_) {
    Greeting greeting;
    greeting.hello = &hello;
    greeting.same_host_socket = same_host_socket;
    greeting.same_host = hello.host_id() == host_id_;
    for (const proto::TransportOffer& o : hello.offers()) {
      if (o.provider() == p->id()) greeting.offer = &o;
    }
    proto::TransportAnswer a;
    a.set_provider(p->id());
    greeting.answer = &a;
    answer.adopt = p->Answer(greeting);
    if (!a.answer().empty() || !a.declined().empty()) {
      *reply.add_answers() = std::move(a);
    }
    if (answer.adopt) return answer;
  }
  // The last provider (tcp) takes every connection; this is a bug.
  reply.set_error(options_.name + " has no transport for " + hello.name());
  reply.set_error_code(static_cast<uint32_t>(StatusCode::kInternal));
  return answer;
}

}  // namespace ps::xfer::internal
