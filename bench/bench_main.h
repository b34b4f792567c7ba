// main() of the Google Benchmark programs (codec_bench, detect_bench,
// accumulate_bench): BENCHMARK_MAIN() with the ps programs' --help,
// --helpfull and --version (cli/help.h).
//
// The benchmark library answers --help itself with its own flag list and
// not a word on what the program measures; here --help prints `usage` and
// names the library's common flags, --helpfull prints the library's full
// list, --version the ps version. All three exit 0; anything else goes to
// benchmark::Initialize, and an argument it does not know exits 1.
#pragma once

namespace ps::bench {

// Runs the benchmarks registered with BENCHMARK() and returns main()'s
// status. `usage`: what the program measures, one sentence or a few.
int BenchmarkMain(int argc, char** argv, const char* usage);

}  // namespace ps::bench
