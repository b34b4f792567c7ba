#include "protocol/serving_lookup.h"

#include <algorithm>
#include <cstring>

#include "protocol/lookup_packet.h"

namespace ps::protocol {
namespace {

template <typename T>
void Put(char* out, size_t offset, T v) {
  std::memcpy(out + offset, &v, sizeof v);
}

template <typename T>
T Get(const char* in, size_t offset) {
  T v;
  std::memcpy(&v, in + offset, sizeof v);
  return v;
}

}  // namespace

size_t ServingRequestRegionBytes(uint32_t max_keys) {
  return kServingPacketOffset + kLookupPacketHeaderBytes +
         size_t{max_keys} * sizeof(uint64_t);
}

size_t ServingReplyRegionBytes(uint32_t max_keys, uint32_t max_dim) {
  return kServingReplyHeaderBytes + size_t{max_keys} * max_dim * sizeof(float);
}

void EncodeServingReplyTail(const ServingReplyHeader& h, char* out) {
  // `out` is the region's byte 8.
  std::memset(out, 0, kServingReplyHeaderBytes - 8);
  Put<uint64_t>(out, 0, h.step);
  Put<int64_t>(out, 8, h.created_unix_ms);
  Put<uint32_t>(out, 16, static_cast<uint32_t>(h.status.code()));
  Put<uint32_t>(out, 20, h.missing);
  const std::string& m = h.status.message();
  const uint32_t n =
      static_cast<uint32_t>(std::min(m.size(), kServingMessageBytes));
  Put<uint32_t>(out, 24, n);
  std::memcpy(out + 28, m.data(), n);
}

ServingReplyHeader DecodeServingReply(std::span<const char> header) {
  ServingReplyHeader h;
  if (header.size() < kServingReplyHeaderBytes) {
    h.status = Internal("a serving reply header of " +
                        std::to_string(header.size()) + " bytes");
    return h;
  }
  const char* p = header.data();
  h.answered = Get<uint64_t>(p, 0);
  h.step = Get<uint64_t>(p, 8);
  h.created_unix_ms = Get<int64_t>(p, 16);
  const uint32_t code = Get<uint32_t>(p, 24);
  h.missing = Get<uint32_t>(p, 28);
  const uint32_t n =
      std::min<uint32_t>(Get<uint32_t>(p, 32), kServingMessageBytes);
  std::string message(p + 36, n);
  if (code > static_cast<uint32_t>(kLastStatusCode)) {
    h.status = Internal("the replica refused the lookup with code " +
                        std::to_string(code) + ": " + message);
  } else if (code != 0) {
    h.status = Status(static_cast<StatusCode>(code), std::move(message));
  }
  return h;
}

}  // namespace ps::protocol
