#include "cli/help.h"

#include <gflags/gflags.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "cli/version.h"

#ifndef PS_SOURCE_DIR
#define PS_SOURCE_DIR ""
#endif

namespace ps::cli {
namespace {

std::string BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path
                                                     : path.substr(slash + 1));
}

// Whether a flag was defined in this project's sources (not glog's or
// gflags'): CMake compiles with absolute source paths, so __FILE__ of a
// DEFINE_* starts with the source folder.
bool InProject(const std::string& file) {
  const std::string_view root = PS_SOURCE_DIR;
  return !root.empty() && file.rfind(root, 0) == 0;
}

// "worker/ps_worker_main.cc" belongs to ps_worker (so do its
// ps_worker_admission.cc and ps_worker_early_stop.cc).
bool OwnFile(const std::string& file, const std::string& program) {
  const std::string base = BaseName(file);
  return !program.empty() && base.rfind(program, 0) == 0 &&
         (base.size() == program.size() || base[program.size()] == '_' ||
          base[program.size()] == '.');
}

// Words of `text` wrapped to lines of at most `width`, each after `indent`.
void Wrap(const std::string& text, size_t indent, size_t width,
          std::string* out) {
  std::istringstream words(text);
  std::string word, line;
  auto flush = [&] {
    if (line.empty()) return;
    *out += std::string(indent, ' ') + line + "\n";
    line.clear();
  };
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() + indent > width) {
      flush();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  flush();
}

void Describe(const gflags::CommandLineFlagInfo& f, std::string* out) {
  std::string head = "  --" + f.name + " (" + f.type;
  if (f.type == "string") {
    head += ", default \"" + f.default_value + "\")";
  } else {
    head += ", default " + f.default_value + ")";
  }
  *out += head + "\n";
  Wrap(f.description, 6, 79, out);
}

}  // namespace

std::string HelpText(std::string_view argv0) {
  const std::string program = BaseName(argv0);
  std::vector<gflags::CommandLineFlagInfo> all, own, shared;
  gflags::GetAllFlags(&all);  // sorted by file, then name
  for (const auto& f : all) {
    if (!InProject(f.filename)) continue;
    (OwnFile(f.filename, program) ? own : shared).push_back(f);
  }
  std::string out = program + ": " + gflags::ProgramUsage() + "\n";
  if (!own.empty()) {
    out += "\nFlags of " + program + ":\n";
    for (const auto& f : own) Describe(f, &out);
  }
  if (!shared.empty()) {
    out += own.empty() ? "\nFlags:\n" : "\nShared ps flags:\n";
    for (const auto& f : shared) Describe(f, &out);
  }
  out +=
      "\n  --flagfile=FILE  reads flags from FILE (one --name=value a line)\n"
      "  --version        the version and build options (transports, CUDA, "
      "sanitizers)\n";
  // Promise glog's flags only where glog is linked in (bench_report and
  // ckpt_bench have gflags without glog), so --helpfull keeps the promise.
  gflags::CommandLineFlagInfo log_dir;
  if (gflags::GetCommandLineFlagInfo("log_dir", &log_dir)) {
    out +=
        "  --helpfull       every flag, glog's logging flags (--log_dir, "
        "--logtostderr,\n"
        "                   --stderrthreshold, --v, ...) and gflags' "
        "included\n";
  } else {
    out +=
        "  --helpfull       every flag, gflags' own and those of the "
        "libraries linked in\n";
  }
  return out;
}

void HandleHelpAndVersion(int argc, char** argv) {
  const char* argv0 = argc > 0 ? argv[0] : "ps";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") return;
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      const std::string text = HelpText(argv0);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::exit(0);
    }
    if (arg == "--helpfull" || arg == "-helpfull") {
      gflags::ShowUsageWithFlags(argv0);
      std::exit(0);
    }
    if (arg == "--version" || arg == "-version") {
      const std::string text = VersionText(BaseName(argv0));
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::exit(0);
    }
  }
}

}  // namespace ps::cli
