#include "bench/report/json_input.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <set>

#include "bench/report/report.h"

namespace ps::bench {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

StatusOr<Struct> Parse(std::string_view json) {
  Struct doc;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &doc);
  if (!status.ok()) {
    return InvalidArgument("not a JSON object: " +
                           std::string(status.message()));
  }
  return doc;
}

// "NAME:FIELD VALUE" for each numeric field of one benchmark entry, and
// NAME:cpu_ms.
std::string SampleLines(const std::string& name,
                        const google::protobuf::Map<std::string, Value>& fields,
                        const std::string& time_unit) {
  std::string out;
  for (const auto& [key, value] : fields) {
    if (value.has_number_value()) {
      out += name + ":" + key + " " + FormatNumber(value.number_value()) + "\n";
    }
  }
  auto cpu = fields.find("cpu_time");
  if (cpu != fields.end() && cpu->second.has_number_value()) {
    double to_ms = time_unit == "us"   ? 1e-3
                   : time_unit == "ms" ? 1.0
                   : time_unit == "s"  ? 1e3
                                       : 1e-6;
    out += name + ":cpu_ms " +
           FormatNumber(cpu->second.number_value() * to_ms) + "\n";
  }
  return out;
}

}  // namespace

StatusOr<double> JsonNumber(std::string_view json, std::string_view path) {
  PS_ASSIGN_OR_RETURN(Struct doc, Parse(json));
  const Struct* at = &doc;
  const Value* v = nullptr;
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    std::string key(path.substr(start, dot - start));
    auto it = at->fields().find(key);
    if (it == at->fields().end()) {
      return NotFound("no field " + std::string(path) + " in the JSON");
    }
    v = &it->second;
    if (dot == std::string_view::npos) break;
    if (!v->has_struct_value()) {
      return NotFound(std::string(path.substr(0, dot)) + " is not an object");
    }
    at = &v->struct_value();
    start = dot + 1;
  }
  if (!v->has_number_value()) {
    return NotFound(std::string(path) + " is not a number");
  }
  return v->number_value();
}

StatusOr<std::string> GbenchMedians(std::string_view json) {
  PS_ASSIGN_OR_RETURN(Struct doc, Parse(json));
  auto list = doc.fields().find("benchmarks");
  if (list == doc.fields().end() || !list->second.has_list_value()) {
    return InvalidArgument(
        "no \"benchmarks\" list: not a Google Benchmark report");
  }
  // Medians first; a benchmark run once (--benchmark_repetitions=1) has no
  // aggregates, and its one run stands for its median.
  std::string out;
  std::set<std::string> with_median;
  for (bool medians : {true, false}) {
    for (const Value& b : list->second.list_value().values()) {
      if (!b.has_struct_value()) continue;
      const auto& f = b.struct_value().fields();
      auto str = [&](const char* key) {
        auto it = f.find(key);
        return it != f.end() && it->second.has_string_value()
                   ? it->second.string_value()
                   : std::string();
      };
      const std::string name = str("run_name");
      if (medians ? str("aggregate_name") != "median"
                  : str("run_type") != "iteration" || with_median.count(name)) {
        continue;
      }
      if (medians) with_median.insert(name);
      out += SampleLines(name, f, str("time_unit"));
    }
  }
  return out;
}

}  // namespace ps::bench
