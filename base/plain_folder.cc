#include "base/plain_folder.h"

#include <algorithm>
#include <filesystem>

namespace ps {

StatusOr<std::vector<std::string>> ListPlainFolder(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status self = fs::symlink_status(dir, ec);
  if (!fs::exists(self)) return NotFound(dir + " does not exist");
  if (ec) return IOError("cannot look at " + dir + ": " + ec.message());
  if (!fs::is_directory(self)) {
    return Corruption(dir + " is not a folder (a link or a file)");
  }
  std::vector<std::string> names;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code entry_ec;
    const fs::file_status s = it->symlink_status(entry_ec);
    if (entry_ec || !fs::is_regular_file(s)) {
      return Corruption(dir + " holds " + it->path().filename().string() +
                        ", which is not a regular file");
    }
    names.push_back(it->path().filename().string());
  }
  if (ec) return IOError("cannot list " + dir + ": " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ps
