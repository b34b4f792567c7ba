// WritePortFile: how a program that listens tells its launcher where
// (ps_server's and ps_serve's --port_file): "host:port\n" written to a
// temporary file and renamed over `path`, so that a reader never sees a
// partial line.
//
// Thread-safety: a free function; two programs must not share a path.
#pragma once

#include <string>

#include "base/status.h"

namespace ps::cli {

// kIOError naming the file.
Status WritePortFile(const std::string& path, const std::string& address);

}  // namespace ps::cli
