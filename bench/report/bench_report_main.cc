// bench_report: the one writer of the benchmark report of scripts/bench_*.sh
// (the table they print and the JSON of --json; the input format is in
// bench/report/report.h), and the reader of the JSON numbers they need.
//
//   { cat samples.txt; echo "row shm_put_bw_1MiB GB/s ours_x ucx_x higher ucx";
//   } |
//     bench_report --json=out.json
//   bench_report --gbench=detect_bench.json        # sample lines
//   bench_report --json_number=end.sum_received.bits_per_second iperf.json
//
// Exit codes: 0 done, 2 bad input or usage, 1 a file that cannot be written.
#include <gflags/gflags.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "bench/report/json_input.h"
#include "bench/report/report.h"
#include "cli/flags.h"

DEFINE_string(json, "", "Also write the report's JSON to this file.");
DEFINE_string(gbench, "",
              "Instead: print the median aggregates of this Google Benchmark "
              "JSON report as sample lines (RUN_NAME:FIELD VALUE).");
DEFINE_string(json_number, "",
              "Instead: print the number at this dotted path of the JSON "
              "document in the file argument (or stdin).");

namespace {

bool ReadInput(const char* path, std::string* out) {
  std::stringstream s;
  if (path == nullptr || std::string(path) == "-") {
    s << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    s << in.rdbuf();
  }
  *out = s.str();
  return true;
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "bench_report: %s\n", message.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "writes the benchmark report (table and JSON) from sample and row "
      "lines on stdin or in the files named; see bench/report/report.h.");
  // PrecheckFlags, not ParseFlags: the arguments after the flags are the
  // input files.
  if (ps::Status s = ps::cli::PrecheckFlags(argc, argv); !s.ok()) {
    return Fail(2, s.message());
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);

  if (!FLAGS_gbench.empty()) {
    std::string text;
    if (!ReadInput(FLAGS_gbench.c_str(), &text))
      return Fail(2, "cannot read " + FLAGS_gbench);
    auto lines = ps::bench::GbenchMedians(text);
    if (!lines.ok())
      return Fail(2, FLAGS_gbench + ": " + lines.status().message());
    std::fputs(lines->c_str(), stdout);
    return 0;
  }
  if (!FLAGS_json_number.empty()) {
    std::string text;
    const char* path = argc > 1 ? argv[1] : nullptr;
    if (!ReadInput(path, &text))
      return Fail(2, std::string("cannot read ") + (path ? path : "stdin"));
    auto v = ps::bench::JsonNumber(text, FLAGS_json_number);
    if (!v.ok()) return Fail(2, v.status().message());
    std::printf("%s\n", ps::bench::FormatNumber(*v).c_str());
    return 0;
  }

  ps::bench::Report report;
  for (int i = 1; i < argc || i == 1; ++i) {
    const char* path = i < argc ? argv[i] : nullptr;
    std::string text;
    if (!ReadInput(path, &text))
      return Fail(2, std::string("cannot read ") + (path ? path : "stdin"));
    if (auto s = report.Add(text); !s.ok())
      return Fail(2, std::string(path ? path : "stdin") + ": " + s.message());
  }
  std::fputs(report.Table().c_str(), stdout);
  if (!FLAGS_json.empty()) {
    std::ofstream out(FLAGS_json, std::ios::trunc);
    out << report.Json();
    out.close();
    if (!out) return Fail(1, "cannot write " + FLAGS_json);
    std::printf("wrote %s\n", FLAGS_json.c_str());
  }
  return 0;
}
