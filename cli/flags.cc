#include "cli/flags.h"

#include <fnmatch.h>
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/help.h"

namespace ps::cli {
namespace {

// A flagfile may name another; gflags follows them without a limit, we stop
// at a depth no real configuration reaches (a file that names itself).
constexpr int kMaxFlagfileDepth = 16;

struct Parsed {
  std::string name, value;
  bool has_value = false;
};

// "--name=value" / "-name" without its dashes, split at the first '='.
Parsed Split(std::string_view arg) {
  arg.remove_prefix(arg[1] == '-' ? 2 : 1);
  Parsed p;
  if (size_t eq = arg.find('='); eq != std::string_view::npos) {
    p.name = std::string(arg.substr(0, eq));
    p.value = std::string(arg.substr(eq + 1));
    p.has_value = true;
  } else {
    p.name = std::string(arg);
  }
  return p;
}

Status CheckFlagfiles(const std::string& paths, const char* argv0, int depth);

// Whether gflags resolves the name: a flag, or "nox" for a boolean flag x.
bool Resolves(const std::string& name) {
  gflags::CommandLineFlagInfo info;
  if (gflags::GetCommandLineFlagInfo(name.c_str(), &info)) return true;
  return name.rfind("no", 0) == 0 &&
         gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) &&
         info.type == "bool";
}

// Checks one flag whose value (if any) is in p. next_value: where to take a
// value from when p has none (the next argument; empty in a flagfile).
Status CheckOne(Parsed p, const char* argv0, int depth,
                const std::function<const char*()>& next_value) {
  gflags::CommandLineFlagInfo info;
  if (!gflags::GetCommandLineFlagInfo(p.name.c_str(), &info)) {
    // "--nox" sets the boolean flag x to false (gflags ignores any value).
    if (p.name.rfind("no", 0) == 0 &&
        gflags::GetCommandLineFlagInfo(p.name.substr(2).c_str(), &info)) {
      if (info.type == "bool") return Status::OK();
      return InvalidArgument("--" + p.name + ": --" + p.name.substr(2) +
                             " is not a boolean flag (see --help)");
    }
    return InvalidArgument("unknown flag --" + p.name + " (see --help)");
  }
  if (!p.has_value) {
    if (info.type == "bool") return Status::OK();
    const char* next = next_value ? next_value() : nullptr;
    if (next == nullptr) {
      return InvalidArgument("flag --" + p.name + " needs a value");
    }
    p.value = next;
  }
  if (p.name == "flagfile") {
    // Checked here rather than set: setting it makes gflags read the files
    // and drop whatever is wrong in them without a word.
    return CheckFlagfiles(p.value, argv0, depth + 1);
  }
  if (gflags::SetCommandLineOption(p.name.c_str(), p.value.c_str()).empty()) {
    return InvalidArgument("bad value '" + p.value + "' for --" + p.name +
                           " (a " + info.type + "; see --help)");
  }
  return Status::OK();
}

// Whether a filename line of a flagfile (glob patterns separated by spaces)
// names this program, as gflags matches it.
bool NamesThisProgram(const std::string& line, const char* argv0) {
  const std::string full = argv0 == nullptr ? "" : argv0;
  const std::string base = full.substr(full.rfind('/') + 1);
  std::istringstream words(line);
  std::string glob;
  while (words >> glob) {
    if (glob == full || glob == base ||
        fnmatch(glob.c_str(), full.c_str(), FNM_PATHNAME) == 0 ||
        fnmatch(glob.c_str(), base.c_str(), FNM_PATHNAME) == 0) {
      return true;
    }
  }
  return false;
}

Status CheckFlagfile(const std::string& path, const char* argv0, int depth) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("--flagfile: cannot read " + path);
  std::string line;
  bool in_filenames = false, relevant = true;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    size_t start = line.find_first_not_of(" \t\f\v");
    if (start == std::string::npos) continue;
    line = line.substr(start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != '-') {
      // A list of program names: the flags up to the next list apply only
      // to the programs it names.
      if (!in_filenames) relevant = false;
      in_filenames = true;
      relevant = relevant || NamesThisProgram(line, argv0);
      continue;
    }
    in_filenames = false;
    if (!relevant || line.size() < 2) continue;
    Parsed p = Split(line);
    // gflags ignores, without a word, a flagfile line whose name it does
    // not resolve; so do we (a shared flagfile may hold other programs'
    // flags). A value it cannot parse ends the program, so that is checked.
    if (!Resolves(p.name)) continue;
    gflags::CommandLineFlagInfo info;
    if (!p.has_value && gflags::GetCommandLineFlagInfo(p.name.c_str(), &info) &&
        info.type != "bool") {
      continue;  // "--name" alone: gflags ignores it in a flagfile
    }
    Status s = CheckOne(std::move(p), argv0, depth, nullptr);
    if (!s.ok()) return s.WithContext(path + ":" + std::to_string(number));
  }
  return Status::OK();
}

Status CheckFlagfiles(const std::string& paths, const char* argv0, int depth) {
  if (depth > kMaxFlagfileDepth) {
    return InvalidArgument("--flagfile: files name each other more than " +
                           std::to_string(kMaxFlagfileDepth) +
                           " levels deep (" + paths + ")");
  }
  std::stringstream list(paths);
  std::string path;
  while (std::getline(list, path, ',')) {
    if (path.empty()) continue;
    Status s = CheckFlagfile(path, argv0, depth);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

std::string Real(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status OutOfBounds(std::string_view name, const std::string& range,
                   const std::string& value, std::string_view why) {
  std::string m =
      "--" + std::string(name) + " must be " + range + ", not " + value;
  if (!why.empty()) m += "; " + std::string(why);
  return InvalidArgument(std::move(m));
}

template <typename T>
Status CheckInteger(std::string_view name, T value, T lo, T hi,
                    std::string_view why) {
  if (value >= lo && value <= hi) return Status::OK();
  return OutOfBounds(
      name, "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
      std::to_string(value), why);
}

}  // namespace

Status PrecheckFlags(int argc, char** argv) {
  HandleHelpAndVersion(argc, argv);  // exits when asked for one
  const char* argv0 = argc > 0 ? argv[0] : nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    Status s = CheckOne(Split(arg), argv0, 0, [&]() -> const char* {
      return i + 1 < argc ? argv[++i] : nullptr;
    });
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status CheckUintFlag(std::string_view name, uint64_t value, uint64_t lo,
                     uint64_t hi, std::string_view why) {
  return CheckInteger(name, value, lo, hi, why);
}

Status CheckIntFlag(std::string_view name, int64_t value, int64_t lo,
                    int64_t hi, std::string_view why) {
  return CheckInteger(name, value, lo, hi, why);
}

Status CheckRealFlag(std::string_view name, double value, double lo, double hi,
                     std::string_view why) {
  if (std::isfinite(value) && value >= lo && value <= hi) return Status::OK();
  return OutOfBounds(name,
                     "a finite number in [" + Real(lo) + ", " + Real(hi) + "]",
                     Real(value), why);
}

Status ParseFlags(int* argc, char*** argv) {
  PS_RETURN_IF_ERROR(PrecheckFlags(*argc, *argv));
  gflags::ParseCommandLineFlags(argc, argv, true);
  if (*argc > 1) {
    return InvalidArgument("unexpected argument '" + std::string((*argv)[1]) +
                           "' (flags are --name=value; see --help)");
  }
  return Status::OK();
}

}  // namespace ps::cli
