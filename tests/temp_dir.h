// TempDir: a fresh folder under $TEST_TMPDIR (or /tmp) for one test,
// removed with everything in it when the TempDir goes. Test code; not
// thread-safe.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace ps::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl =
        std::string(base ? base : "/tmp") + "/" + tag + "_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ps::testing
