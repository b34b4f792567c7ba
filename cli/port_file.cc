#include "cli/port_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

namespace ps::cli {

Status WritePortFile(const std::string& path, const std::string& address) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << address << "\n";
    out.close();
    if (!out) return IOError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoStatus(StatusCode::kIOError, "rename to " + path, errno);
  }
  return Status::OK();
}

}  // namespace ps::cli
