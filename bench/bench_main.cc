#include "bench/bench_main.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli/version.h"

namespace ps::bench {
namespace {

std::string BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path
                                                     : path.substr(slash + 1));
}

void PrintHelp(const std::string& program, const char* usage) {
  std::printf("%s: %s\n", program.c_str(), usage);
  std::fputs(R"(
Flags: the Google Benchmark library's (all of them: --helpfull); the common
ones:
  --benchmark_filter=REGEX       only the benchmarks whose names match REGEX
  --benchmark_list_tests         prints the benchmarks' names, runs none
  --benchmark_repetitions=N      runs each benchmark N times and adds the
                                 mean, median and stddev
  --benchmark_format=console|json|csv  the format of the results on stdout
  --benchmark_out=FILE           also writes the results to FILE (json)

  --version        the version and build options (transports, CUDA, sanitizers)
  --helpfull       every flag of the benchmark library (its own help)
)",
             stdout);
}

}  // namespace

int BenchmarkMain(int argc, char** argv, const char* usage) {
  const std::string program = BaseName(argc > 0 ? argv[0] : "benchmark");
  // Before benchmark::Initialize, which would print its own help for --help.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      PrintHelp(program, usage);
      return 0;
    }
    if (arg == "--helpfull" || arg == "-helpfull") {
      std::printf("%s: the Google Benchmark library's flags\n\n",
                  program.c_str());
      benchmark::PrintDefaultHelp();
      return 0;
    }
    if (arg == "--version" || arg == "-version") {
      std::fputs(cli::VersionText(program).c_str(), stdout);
      return 0;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace ps::bench
