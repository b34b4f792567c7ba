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
// Header-only: small, and used by Context::Allocate and the liveness page.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status_or.h"
#include "core/access.h"
#include "core/socket.h"

namespace ps::xfer::internal {

// Whether peers of a region with these access flags write its memory (puts
// and atomics both do); its memfd is sealed against writes otherwise.
inline bool PeersMayWrite(uint32_t access) {
  return (access & (kRemoteWrite | kRemoteAtomic)) != 0;
}

struct SealedMemfd {
  UniqueFd fd;           // O_RDWR, the owner's
  UniqueFd read_only;    // O_RDONLY, for peers; invalid when they may write
  void* data = nullptr;  // the owner's writable mapping of `bytes`
  size_t bytes = 0;

  // The descriptor a same-host peer receives.
  int peer_fd() const { return read_only.valid() ? read_only.get() : fd.get(); }

  // `bytes` (a multiple of the page size) of zeroed memory named `name`
  // (shows in /proc/<pid>/maps), mapped read-write here and sealed as above.
  // kResourceExhausted when the memory cannot be had, kNotSupported when
  // the kernel cannot seal (F_SEAL_FUTURE_WRITE needs Linux 5.1), kIOError
  // when the read-only descriptor cannot be opened (needs /proc).
  static StatusOr<SealedMemfd> Create(const std::string& name, size_t bytes,
                                      bool peers_may_write) {
    SealedMemfd m;
    m.fd =
        UniqueFd(memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!m.fd.valid()) {
      return ErrnoStatus(StatusCode::kResourceExhausted, "memfd_create " + name,
                         errno);
    }
    if (ftruncate(m.fd.get(), static_cast<off_t>(bytes)) != 0) {
      return ErrnoStatus(
          StatusCode::kResourceExhausted,
          "ftruncate memfd " + name + " to " + std::to_string(bytes) + " bytes",
          errno);
    }
    // The owner's mapping first: F_SEAL_FUTURE_WRITE leaves mappings that
    // exist writable, and refuses new writable ones.
    void* p =
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd.get(), 0);
    if (p == MAP_FAILED) {
      return ErrnoStatus(
          StatusCode::kResourceExhausted,
          "mmap " + std::to_string(bytes) + " bytes of memfd " + name, errno);
    }
    Status s = Seal(&m, name, peers_may_write);
    if (!s.ok()) {
      munmap(p, bytes);
      return s;
    }
    m.data = p;
    m.bytes = bytes;
    return m;
  }

 private:
  static Status Seal(SealedMemfd* m, const std::string& name,
                     bool peers_may_write) {
    int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    if (!peers_may_write) seals |= F_SEAL_FUTURE_WRITE;
    if (fcntl(m->fd.get(), F_ADD_SEALS, seals) != 0) {
      return ErrnoStatus(StatusCode::kNotSupported,
                         "sealing memfd " + name +
                             " (F_SEAL_FUTURE_WRITE needs Linux 5.1 or later)",
                         errno);
    }
    if (peers_may_write) return Status::OK();
    // A memfd has no path to reopen but its /proc link; the new open file
    // description is read-only whatever the owner's is.
    const std::string link = "/proc/self/fd/" + std::to_string(m->fd.get());
    m->read_only = UniqueFd(open(link.c_str(), O_RDONLY | O_CLOEXEC));
    if (!m->read_only.valid()) {
      return ErrnoStatus(StatusCode::kIOError,
                         "reopening memfd " + name + " read-only through " +
                             link + " (is /proc mounted?)",
                         errno);
    }
    return Status::OK();
  }
};

}  // namespace ps::xfer::internal
