#include "cli/guarded_main.h"

#include <cstdio>
#include <exception>
#include <new>
#include <string>

namespace ps::cli {

int GuardedMain(std::string_view program, const std::function<int()>& body) {
  const std::string name(program);
  try {
    return body();
  } catch (const std::bad_alloc& e) {
    // Only fixed text and what(): formatting more could need the memory
    // that just ran out.
    std::fprintf(stderr,
                 "%s: out of memory: %s (a size given by a flag or the table "
                 "config is more than this machine can hold)\n",
                 name.c_str(), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: failed: %s\n", name.c_str(), e.what());
  }
  return 1;
}

}  // namespace ps::cli
