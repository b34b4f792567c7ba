// The last line of defence of a ps program's main(): an exception that
// escapes it (std::bad_alloc above all: a size no flag check caught, a table
// config asking for more memory than the machine has) would end the program
// in std::terminate, an abort (exit 134) with at most the exception's type
// on stderr. GuardedMain catches it and exits 1 with a message instead.
//
//   int Main(int argc, char** argv) { ... }
//   int main(int argc, char** argv) {
//     return ps::cli::GuardedMain("ps_worker", [&] { return Main(argc, argv);
//     });
//   }
#pragma once

#include <functional>
#include <string_view>

namespace ps::cli {

// body()'s status; 1 after printing "<program>: out of memory: ..." for a
// std::bad_alloc or "<program>: failed: ..." for another std::exception.
int GuardedMain(std::string_view program, const std::function<int()>& body);

}  // namespace ps::cli
