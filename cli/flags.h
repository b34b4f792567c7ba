// Command-line flags of the ps programs, checked before they are used.
//
// gflags ends a program with status 1 on an unknown flag, a flag without its
// value or a value of the wrong type, but the ps programs promise 2 for bad
// usage (1 means something failed while running: a damaged checkpoint, a
// diverged training run). PrecheckFlags finds those mistakes first and
// returns them as a Status, so that main() prints it and exits 2; gflags then
// parses a command line it accepts.
//
// The range checks give each flag that sizes an allocation (or a loop) an
// upper bound, checked before anything is allocated, so that a typo such as
// --batch_size=4000000000 is a usage error naming the flag rather than a
// std::bad_alloc.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace ps::cli {

// Checks every flag argument of argv (up to a "--") against the flags this
// program defines, the way gflags will parse it: "--name=value",
// "--name value", "-name", "--nobool". kInvalidArgument, with a message
// such as "unknown flag --no_such_flag (see --help)", for an unknown name, a
// missing value or a value gflags rejects. The files of --flagfile are
// checked too (recursively), with gflags' rules for them: a bad value is an
// error, an unknown name is ignored (gflags ignores it as well), and the
// sections that apply to other programs are skipped. Values are set through
// gflags while checking; ParseCommandLineFlags sets them again afterwards.
// First, --help, --helpfull and --version are answered (cli/help.h: printed,
// then exit 0), so that every ps program handles them alike.
Status PrecheckFlags(int argc, char** argv);

// What a ps program's main() does with its command line: PrecheckFlags, then
// gflags::ParseCommandLineFlags (which removes the flags), then
// kInvalidArgument for an argument that is not a flag. Exit 2 on an error.
Status ParseFlags(int* argc, char*** argv);

// kInvalidArgument "--name must be in [lo, hi], not value" (then "; " and
// why, when given) unless lo <= value <= hi.
Status CheckUintFlag(std::string_view name, uint64_t value, uint64_t lo,
                     uint64_t hi, std::string_view why = {});
Status CheckIntFlag(std::string_view name, int64_t value, int64_t lo,
                    int64_t hi, std::string_view why = {});
// The same for a real number; NaN and +-inf are always out of range.
Status CheckRealFlag(std::string_view name, double value, double lo, double hi,
                     std::string_view why = {});

}  // namespace ps::cli
