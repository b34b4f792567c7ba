// The hand-off file: how a decode process tells prefill where to send. Decode
// writes it once its pool and control region are registered (to a temporary
// name, then renamed, so a reader never sees half of it); prefill waits for
// it to appear and reads it. Text, one "key value..." line each:
//
//   kv_transfer handoff 1
//   address 127.0.0.1:40123            decode's Context::address()
//   shape 32 16384 8 128               layers tokens heads head_dim
//   heads 0 4                          decode's head range [begin, end)
//   transfers 4                        how many times prefill sends the cache
//   pool_block 0                       offset of decode's cache in the pool
//   pool 0a1b...                       the pool's region descriptor, hex
//   control 0a1b...                    the control region's descriptor, hex
//
// Any channel would do (a socket, a key-value store); a file needs nothing
// running and is easy to pass between two shells.
//
// Thread-compatible functions; a Handoff is a plain value.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/status_or.h"
#include "examples/kv_transfer/kv_shape.h"

namespace ps::kv {

struct Handoff {
  std::string address;
  KvShape shape;
  HeadRange heads;
  uint64_t transfers = 0;
  uint64_t pool_block = 0;
  std::string pool_descriptor;     // binary
  std::string control_descriptor;  // binary
};

// Writes `h` to `path` atomically (PATH.tmp, then rename). kIOError naming
// the path when it cannot.
Status WriteHandoff(const std::string& path, const Handoff& h);

// Parses the file at `path`: kNotFound when it does not exist, kIOError when
// it cannot be read, kInvalidArgument naming the line that is not what
// WriteHandoff writes (also an invalid shape or head range).
StatusOr<Handoff> ReadHandoff(const std::string& path);

// ReadHandoff, polling every 20 ms while the file does not exist yet, up to
// `timeout`; then kTimeout saying that no decode published one.
StatusOr<Handoff> WaitForHandoff(const std::string& path,
                                 std::chrono::milliseconds timeout);

}  // namespace ps::kv
