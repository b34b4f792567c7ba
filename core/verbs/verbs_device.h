// internal::VerbsDevice: this process's RDMA device (libibverbs): the opened
// device, its protection domain, the chosen port and GID, and the memory
// registered with it. One per Context, made when the Context starts if a
// usable device exists.
//
// Choice of device, port and GID: ContextOptions (ib_device, ib_port,
// ib_gid_index; a program's main() fills them from XFER_IB_DEV and the like:
// core/context_environment.h), else the first device with an active port, its
// first active port, and on RoCE the first RoCE v2 GID that carries an IPv4
// address (::ffff:a.b.c.d), which routes over UDP/IP like the host's
// traffic; then any RoCE v2 GID, then GID 0.
//
// Registered memory: every region of the Context (VerbsDevice::Register at
// Allocate/Register), plus the index of those regions by address, so an
// operation whose local buffer lies inside one of them uses it in place.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::xfer::internal {

struct VerbsDeviceOptions {
  std::string device;  // empty: first with an active port
  int port = 0;        // 0: first active port
  int gid_index = -1;  // -1: choose (RoCE v2 IPv4 first)
};

// A memory registration; deregisters when destroyed.
class VerbsRegistration {
 public:
  ~VerbsRegistration();
  VerbsRegistration(const VerbsRegistration&) = delete;
  VerbsRegistration& operator=(const VerbsRegistration&) = delete;

  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  uint64_t address() const { return reinterpret_cast<uintptr_t>(mr_->addr); }

 private:
  friend class VerbsDevice;
  VerbsRegistration(std::shared_ptr<class VerbsDevice> device, ibv_mr* mr,
                    bool indexed)
      : device_(std::move(device)), mr_(mr), indexed_(indexed) {}
  // Keeps the device (and its protection domain) open while registered.
  std::shared_ptr<class VerbsDevice> device_;
  ibv_mr* mr_;
  bool indexed_;
};

// Shared by the Context, its regions' registrations and its queue pairs, so
// it is closed after the last of them (a region or an endpoint may outlive
// its Context).
class VerbsDevice : public std::enable_shared_from_this<VerbsDevice> {
 public:
  // The device to use, or kNotFound (with the reason) when this machine has
  // none usable; kInvalidArgument for a named device or port that does not
  // exist or is not active.
  static StatusOr<std::shared_ptr<VerbsDevice>> Open(
      const VerbsDeviceOptions& options);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  uint8_t port() const { return port_; }
  int gid_index() const { return gid_index_; }
  const ibv_gid& gid() const { return gid_; }
  uint16_t lid() const { return lid_; }
  ibv_mtu mtu() const { return mtu_; }
  bool roce() const { return roce_; }
  const std::string& name() const { return name_; }
  // "rxe0 port 1 gid 1 (::ffff:10.11.12.1, RoCE v2) mtu 1024".
  std::string Describe() const;
  int max_qp_rd_atom() const { return max_qp_rd_atom_; }

  // Registers [data, data + length) for the remote operations in `access`
  // (ps::xfer::Access bits; local write is always granted). `indexed`
  // regions are found by FindLocal.
  StatusOr<std::unique_ptr<VerbsRegistration>> Register(void* data,
                                                        size_t length,
                                                        uint32_t access,
                                                        bool indexed);
  // The lkey of a registered, indexed region that contains all of
  // [data, data + length); false if there is none.
  bool FindLocal(const void* data, size_t length, uint32_t* lkey) const;

 private:
  friend class VerbsRegistration;
  VerbsDevice() = default;
  void Unindex(ibv_mr* mr);

  std::string name_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint8_t port_ = 1;
  int gid_index_ = 0;
  ibv_gid gid_{};
  uint16_t lid_ = 0;
  ibv_mtu mtu_ = IBV_MTU_1024;
  bool roce_ = false;
  int max_qp_rd_atom_ = 1;

  mutable std::shared_mutex index_mu_;
  // Indexed registrations by start address: (end address, lkey).
  std::map<uintptr_t, std::pair<uintptr_t, uint32_t>> index_;
};

// ibv access flags for ps::xfer::Access bits.
int VerbsAccessFlags(uint32_t access);

}  // namespace ps::xfer::internal
