// The Prometheus text exposition format (version 0.0.4): one "# HELP" and
// one "# TYPE" line per family, then its samples; histograms as
// name_bucket{...,le="..."} (cumulative, ending with le="+Inf"), name_sum
// and name_count. Pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "metrics/family.h"

namespace ps::metrics {

// The content type a /metrics answer carries.
inline constexpr const char* kTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Label values: backslash, double quote and newline escaped.
std::string EscapeLabelValue(const std::string& value);
// HELP text: backslash and newline escaped.
std::string EscapeHelp(const std::string& help);
// A sample value: integers without a fraction, "+Inf", "-Inf", "NaN",
// otherwise the shortest form that reads back the same double.
std::string FormatValue(double value);

std::string RenderText(const std::vector<Family>& families);

}  // namespace ps::metrics
