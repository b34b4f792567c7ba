// Numbers out of the JSON the benchmarks and their peers print (Google
// Benchmark's --benchmark_out, iperf3 -J, ckpt_bench's result line,
// ps_worker's --metrics_json), as sample lines for bench/report/report.h.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <string>
#include <string_view>

#include "base/status_or.h"

namespace ps::bench {

// The number at a dotted path ("end.sum_received.bits_per_second") of a
// JSON document; kNotFound when absent or not a number.
StatusOr<double> JsonNumber(std::string_view json, std::string_view path);

// One sample line "RUN_NAME:FIELD VALUE" for every numeric field of every
// median aggregate of a Google Benchmark JSON report (of its one run for a
// benchmark run once), plus "RUN_NAME:cpu_ms" (cpu_time in milliseconds,
// whatever its time_unit).
StatusOr<std::string> GbenchMedians(std::string_view json);

}  // namespace ps::bench
