// internal::SealedMemfd: memory this process shares with processes on the
// same host, in a memfd whose seals make what a peer can do with the
// descriptor it receives no more than the region's access flags allow. An
// access flag alone binds only honest peers: a peer holding the memfd could
// map it writable, reopen /proc/self/fd/N read-write, or ftruncate it (any
// descriptor can), after which the owner dies of SIGBUS at its next access.
//
//   F_SEAL_SHRINK | F_SEAL_GROW  always: the size is fixed, for everyone.
//   F_SEAL_FUTURE_WRITE          when peers may not write: no writable shared
//                                mapping and no write(2) from here on, from
//                                any descriptor, a reopened one included;
//                                the owner's mapping, made before, stays
//                                writable.
//   F_SEAL_SEAL                  always, last: a peer cannot add seals (one
//                                adding FUTURE_WRITE to a writable region
//                                would lock every other peer out of it).
//
// Peers receive peer_fd(): a read-only descriptor when they may not write
// (mmap(PROT_WRITE, MAP_SHARED) and mprotect(PROT_WRITE) fail on it by its
// mode already), the owner's descriptor when they may.
//
// Used by Context::Allocate and the liveness page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status_or.h"
#include "core/access.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

// Whether peers of a region with these access flags write its memory (puts
// and atomics both do); its memfd is sealed against writes otherwise.
inline bool PeersMayWrite(uint32_t access) {
  return (access & (kRemoteWrite | kRemoteAtomic)) != 0;
}

struct SealedMemfd {
  net::UniqueFd fd;         // O_RDWR, the owner's
  net::UniqueFd read_only;  // O_RDONLY, for peers; invalid when they may write
  void* data = nullptr;     // the owner's writable mapping of `bytes`
  size_t bytes = 0;

  // The descriptor a same-host peer receives.
  int peer_fd() const { return read_only.valid() ? read_only.get() : fd.get(); }

  // `bytes` (a multiple of the page size) of zeroed memory named `name`
  // (shows in /proc/<pid>/maps), mapped read-write here and sealed as above.
  // kResourceExhausted when the memory cannot be had, kNotSupported when
  // the kernel cannot seal (F_SEAL_FUTURE_WRITE needs Linux 5.1), kIOError
  // when the read-only descriptor cannot be opened (needs /proc).
  static StatusOr<SealedMemfd> Create(const std::string& name, size_t bytes,
                                      bool peers_may_write);
};

}  // namespace ps::xfer::internal
