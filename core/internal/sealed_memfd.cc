#include "core/internal/sealed_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace ps::xfer::internal {
namespace {

// Seals m->fd as the header says and, when peers may not write, opens the
// read-only descriptor they receive.
Status Seal(SealedMemfd* m, const std::string& name, bool peers_may_write) {
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
  m->read_only = net::UniqueFd(open(link.c_str(), O_RDONLY | O_CLOEXEC));
  if (!m->read_only.valid()) {
    return ErrnoStatus(StatusCode::kIOError,
                       "reopening memfd " + name + " read-only through " +
                           link + " (is /proc mounted?)",
                       errno);
  }
  return Status::OK();
}

}  // namespace

StatusOr<SealedMemfd> SealedMemfd::Create(const std::string& name, size_t bytes,
                                          bool peers_may_write) {
  SealedMemfd m;
  m.fd = net::UniqueFd(
      memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
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

}  // namespace ps::xfer::internal
