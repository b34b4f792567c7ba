#include "python/src/status_error.h"

#include <array>

namespace ps::python {
namespace {

namespace py = pybind11;

// The ps.errors class name of each StatusCode, in the enum's order.
constexpr std::array<const char*, static_cast<size_t>(kLastStatusCode) + 1>
    kErrorClassNames = {
        "Error",  // kOk: never raised
        "InvalidArgumentError",
        "NotRegisteredError",
        "AccessDeniedError",
        "InvalidKeyError",
        "OutOfRangeError",
        "StaleDescriptorError",
        "DeadlineError",
        "PeerLostError",
        "NetworkError",
        "NotInitializedError",
        "CorruptionError",
        "NotFoundError",
        "FileError",
        "ResourceExhaustedError",
        "NotSupportedError",
        "InternalError",
        "UnauthenticatedError",
        "CancelledError",
};
static_assert(kErrorClassNames.size() == 19,
              "a StatusCode was added: name its class here and in "
              "python/ps/errors.py");

void SetPythonError(const Status& status) {
  auto index = static_cast<size_t>(status.code());
  const char* name =
      index < kErrorClassNames.size() ? kErrorClassNames[index] : "Error";
  py::object cls = py::module_::import("ps.errors").attr(name);
  PyErr_SetObject(cls.ptr(), py::str(status.message()).ptr());
}

}  // namespace

void ThrowInvalidArgument(std::string message) {
  throw StatusError(Status(StatusCode::kInvalidArgument, std::move(message)));
}

void RegisterStatusErrors() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      SetPythonError(e.status());
    }
  });
}

}  // namespace ps::python
