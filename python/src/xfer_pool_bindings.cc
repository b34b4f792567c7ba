// ps._native.xfer, part three: RegisteredPool (core/registered_pool.h), one
// registered region handed out in blocks. A block comes back as (offset,
// size, array): the array views the block's bytes and keeps the pool (and so
// its context) alive.
#include <memory>
#include <string>

#include "core/registered_pool.h"
#include "python/src/status_error.h"
#include "python/src/xfer_handles.h"

namespace ps::python {
namespace {

struct PoolHandle {
  // Deregisters the region (GIL released: it may wait for the context's
  // threads) before the context handle goes.
  ~PoolHandle() {
    WithoutGil([this] { pool.reset(); });
  }

  std::shared_ptr<ContextHandle> context;
  std::unique_ptr<xfer::RegisteredPool> pool;
};

std::shared_ptr<PoolHandle> MakePool(const std::shared_ptr<ContextHandle>& ctx,
                                     int64_t nbytes, int64_t access,
                                     int64_t alignment) {
  if (nbytes <= 0 || alignment < 0) {
    ThrowInvalidArgument("a pool needs a positive size and an alignment >= 0");
  }
  auto p = std::make_shared<PoolHandle>();
  p->context = ctx;
  p->pool = ValueOrThrow(xfer::RegisteredPool::Create(
      ctx->context.get(), static_cast<size_t>(nbytes),
      static_cast<uint32_t>(access),
      alignment != 0 ? static_cast<size_t>(alignment)
                     : xfer::RegisteredPool::kDefaultAlignment));
  return p;
}

py::tuple Allocate(const std::shared_ptr<PoolHandle>& self, int64_t nbytes,
                   int64_t alignment) {
  if (nbytes <= 0 || alignment < 0) {
    ThrowInvalidArgument("a block needs a positive size and an alignment >= 0");
  }
  xfer::PoolBlock b = ValueOrThrow(self->pool->Allocate(
      static_cast<size_t>(nbytes), static_cast<size_t>(alignment)));
  auto* owner = new std::shared_ptr<PoolHandle>(self);
  py::capsule keep(owner, [](void* p) {
    delete static_cast<std::shared_ptr<PoolHandle>*>(p);
  });
  py::array_t<uint8_t> view(static_cast<py::ssize_t>(b.size),
                            static_cast<uint8_t*>(b.data), keep);
  return py::make_tuple(b.offset, b.size, view);
}

void Free(PoolHandle& self, int64_t offset, int64_t nbytes) {
  if (offset < 0) ThrowInvalidArgument("a block offset is never negative");
  const auto at = static_cast<uint64_t>(offset);
  ThrowIfError(self.pool->Free(
      xfer::PoolBlock{at, static_cast<size_t>(nbytes),
                      static_cast<uint8_t*>(self.pool->region().data()) + at}));
}

}  // namespace

void BindPool(py::module_& m) {
  py::class_<PoolHandle, std::shared_ptr<PoolHandle>>(
      m, "RegisteredPool",
      "core/registered_pool.h: one registered region handed out in blocks.")
      .def(py::init(&MakePool), py::arg("context"), py::arg("nbytes"),
           py::arg("access"), py::arg("alignment") = 0)
      .def("allocate", &Allocate, py::arg("nbytes"), py::arg("alignment") = 0)
      .def("free", &Free, py::arg("offset"), py::arg("nbytes"))
      .def_property_readonly(
          "descriptor",
          [](const PoolHandle& p) { return py::bytes(p.pool->descriptor()); })
      .def_property_readonly("used",
                             [](const PoolHandle& p) { return p.pool->used(); })
      .def_property_readonly(
          "capacity", [](const PoolHandle& p) { return p.pool->capacity(); })
      .def_property_readonly("region_id", [](const PoolHandle& p) {
        return p.pool->region().id();
      });
}

}  // namespace ps::python
