// --help, --helpfull and --version of the ps programs, handled before
// gflags sees the command line (PrecheckFlags calls HandleHelpAndVersion).
//
// gflags' own --help lists every flag linked in, glog's two dozen first by
// file name; ours prints the usage message (gflags::SetUsageMessage), then
// the program's own flags (defined in files named after it: ps_worker ->
// worker/ps_worker_*.cc), then the other ps flags linked in, and points to
// --helpfull for the rest (glog's logging flags where glog is linked in,
// gflags' own, a library's such as RocksDB's). --helpfull is gflags' full
// list; --version prints cli/version.h's text. All three exit 0.
//
// Thread-safety: call from main() before any other thread starts.
#pragma once

#include <string>
#include <string_view>

namespace ps::cli {

// When argv (up to a "--") holds --help / -help / -h, --helpfull or
// --version, prints what it asks for on stdout and exits 0; else returns.
void HandleHelpAndVersion(int argc, char** argv);

// What --help prints for `program` (argv[0]; its base name is used).
std::string HelpText(std::string_view program);

}  // namespace ps::cli
