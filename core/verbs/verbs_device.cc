#include "core/verbs/verbs_device.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/access.h"

namespace ps::xfer::internal {
namespace {

bool IsIpv4Mapped(const ibv_gid& gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, prefix, sizeof(prefix)) == 0;
}

bool IsZero(const ibv_gid& gid) {
  static const ibv_gid zero{};
  return std::memcmp(gid.raw, zero.raw, sizeof(zero.raw)) == 0;
}

std::string GidText(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
  return text;
}

// The GID to use on a RoCE port: the requested one, else RoCE v2 with an
// IPv4-mapped address, else any RoCE v2, else index 0.
StatusOr<int> ChooseGid(ibv_context* ctx, uint8_t port, int table_len,
                        int wanted) {
  if (wanted >= 0) {
    if (wanted >= table_len) {
      return InvalidArgument("GID index " + std::to_string(wanted) +
                             " is past the port's table (" +
                             std::to_string(table_len) + " entries)");
    }
    return wanted;
  }
  int any_v2 = -1;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &entry, 0) != 0) {
      continue;
    }
    ibv_gid gid;
    std::memcpy(gid.raw, entry.gid.raw, sizeof(gid.raw));
    if (IsZero(gid) || entry.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
    if (IsIpv4Mapped(gid)) return i;
    if (any_v2 < 0) any_v2 = i;
  }
  return any_v2 >= 0 ? any_v2 : 0;
}

}  // namespace

int VerbsAccessFlags(uint32_t access) {
  int flags = IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  if (access & kRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  // PutWithNotify stores its notify word with an atomic compare-and-swap (an
  // RDMA WRITE may place an 8-byte word a byte at a time), so a writable
  // region takes NIC atomics too. That grants nothing a write does not: a
  // writer may already set any word to any value. Our own FetchAdd64 and
  // CompareSwap64 still need kRemoteAtomic, checked at the origin.
  if (access & (kRemoteWrite | kRemoteAtomic)) {
    flags |= IBV_ACCESS_REMOTE_ATOMIC;
  }
  return flags;
}

StatusOr<std::shared_ptr<VerbsDevice>> VerbsDevice::Open(
    const VerbsDeviceOptions& options) {
  // Without the kernel's RDMA class there is nothing to open; checking first
  // spares loading every provider library on machines without RDMA.
  struct stat st;
  if (stat("/sys/class/infiniband", &st) != 0) {
    return NotFound("no RDMA devices (/sys/class/infiniband is absent)");
  }
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr || count == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    return NotFound("no RDMA devices found by libibverbs");
  }
  std::shared_ptr<VerbsDevice> d(new VerbsDevice());
  std::string why = "no RDMA device has an active port";
  for (int i = 0; i < count && d->context_ == nullptr; ++i) {
    const char* name = ibv_get_device_name(list[i]);
    if (!options.device.empty() && options.device != name) continue;
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) {
      why = std::string("cannot open ") + name + ": " + std::strerror(errno);
      continue;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) != 0) {
      ibv_close_device(ctx);
      continue;
    }
    const int first = options.port > 0 ? options.port : 1;
    const int last = options.port > 0 ? options.port : attr.phys_port_cnt;
    for (int p = first; p <= last; ++p) {
      ibv_port_attr pattr{};
      if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pattr) != 0) continue;
      if (pattr.state != IBV_PORT_ACTIVE) {
        why =
            std::string(name) + " port " + std::to_string(p) + " is not active";
        continue;
      }
      const bool roce = pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
      int gid_index = options.gid_index >= 0 ? options.gid_index : 0;
      if (roce) {
        auto chosen = ChooseGid(ctx, static_cast<uint8_t>(p), pattr.gid_tbl_len,
                                options.gid_index);
        if (!chosen.ok()) {
          why = std::string(name) + ": " + chosen.status().message();
          continue;
        }
        gid_index = *chosen;
      }
      ibv_gid gid{};
      if (ibv_query_gid(ctx, static_cast<uint8_t>(p), gid_index, &gid) != 0) {
        why = std::string(name) + ": cannot read GID " +
              std::to_string(gid_index);
        continue;
      }
      d->name_ = name;
      d->context_ = ctx;
      d->port_ = static_cast<uint8_t>(p);
      d->gid_index_ = gid_index;
      d->gid_ = gid;
      d->lid_ = pattr.lid;
      d->mtu_ = pattr.active_mtu;
      d->roce_ = roce;
      d->max_qp_rd_atom_ = std::max(1, attr.max_qp_rd_atom);
      break;
    }
    if (d->context_ == nullptr) ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (d->context_ == nullptr) {
    if (!options.device.empty() && why == "no RDMA device has an active port") {
      why = "no RDMA device named " + options.device;
    }
    return options.device.empty() && options.port == 0 ? NotFound(why)
                                                       : InvalidArgument(why);
  }
  d->pd_ = ibv_alloc_pd(d->context_);
  if (d->pd_ == nullptr) {
    return ErrnoStatus(StatusCode::kIOError, "ibv_alloc_pd on " + d->name_,
                       errno);
  }
  return d;
}

VerbsDevice::~VerbsDevice() {
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (context_ != nullptr) ibv_close_device(context_);
}

std::string VerbsDevice::Describe() const {
  std::string s =
      name_ + " port " + std::to_string(port_) + " gid " +
      std::to_string(gid_index_) + " (" + GidText(gid_) +
      (roce_ ? ", RoCE" : ", InfiniBand lid " + std::to_string(lid_)) +
      ") mtu " + std::to_string(128 << static_cast<int>(mtu_));
  return s;
}

StatusOr<std::unique_ptr<VerbsRegistration>> VerbsDevice::Register(
    void* data, size_t length, uint32_t access, bool indexed) {
  ibv_mr* mr = ibv_reg_mr(pd_, data, length, VerbsAccessFlags(access));
  if (mr == nullptr) {
    const int err = errno;
    return ErrnoStatus(StatusCode::kResourceExhausted,
                       "ibv_reg_mr of " + std::to_string(length) +
                           " bytes on " + name_ +
                           (err == ENOMEM || err == EPERM
                                ? " (locked-memory limit? see ulimit -l)"
                                : ""),
                       err);
  }
  if (indexed) {
    const auto start = reinterpret_cast<uintptr_t>(data);
    std::unique_lock lock(index_mu_);
    index_[start] = {start + length, mr->lkey};
  }
  return std::unique_ptr<VerbsRegistration>(
      new VerbsRegistration(shared_from_this(), mr, indexed));
}

bool VerbsDevice::FindLocal(const void* data, size_t length,
                            uint32_t* lkey) const {
  const auto start = reinterpret_cast<uintptr_t>(data);
  std::shared_lock lock(index_mu_);
  auto it = index_.upper_bound(start);
  if (it == index_.begin()) return false;
  --it;
  if (start + length > it->second.first || start + length < start) {
    return false;
  }
  *lkey = it->second.second;
  return true;
}

void VerbsDevice::Unindex(ibv_mr* mr) {
  std::unique_lock lock(index_mu_);
  auto it = index_.find(reinterpret_cast<uintptr_t>(mr->addr));
  if (it != index_.end() && it->second.second == mr->lkey) index_.erase(it);
}

VerbsRegistration::~VerbsRegistration() {
  if (indexed_) device_->Unindex(mr_);
  ibv_dereg_mr(mr_);
}

}  // namespace ps::xfer::internal
