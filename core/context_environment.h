// The environment variables the xfer core honours, and the one place they
// are read: from an environment block that a program's main() (or the C and
// Python entry points) hands down, never from the process's environment
// behind the caller's back. A library that embeds the core decides itself
// whether its users' environment may steer it.
//
//   XFER_TRANSPORT      auto | shm | tcp | verbs: the transport, where the
//                       options leave it kAuto
//   XFER_IB_DEV         RDMA device for verbs ("rxe0"), where ib_device is
//                       empty
//   XFER_IB_PORT        its port, where ib_port is 0
//   XFER_IB_GID_INDEX   its GID index, where ib_gid_index is -1
//
// Pure functions of their arguments: thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "base/status_or.h"
#include "core/context_options.h"

namespace ps::xfer {

// The value of `name` in `envp` ("NAME=value" entries up to a null
// pointer, a program's own, as main() receives it); nullopt when absent or
// when envp is null. The first entry wins, as in the C library.
std::optional<std::string_view> EnvValue(const char* const* envp,
                                         std::string_view name);

// `options` with what it leaves open filled in from the variables above
// (empty values count as absent). kInvalidArgument naming the variable for
// a value that does not parse; nothing is guessed.
StatusOr<ContextOptions> ApplyEnvironment(ContextOptions options,
                                          const char* const* envp);

}  // namespace ps::xfer
