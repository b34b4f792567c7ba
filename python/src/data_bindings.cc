// ps._native.data: the C++ click-log source ps_worker reads
// (worker/train/example_source.h: this worker's lines of a file, parsed by
// worker/data) and the metrics (worker/eval/metrics.h), so a PyTorch model
// reads the same files, with the same feature hashing (and, split by
// lines, the same split between workers) as ps_worker does, at C++ speed,
// and is scored by the same AUC.
//
// A batch comes back as NumPy arrays in the reader's compressed-row form
// (ExampleBatch): labels, offsets (examples + 1), ids, values, fields; moved
// into the arrays without a copy. Reading releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>

#include "python/src/array_args.h"
#include "python/src/bindings.h"
#include "python/src/status_error.h"
#include "worker/eval/metrics.h"
#include "worker/train/example_source.h"

namespace ps::python {
namespace {

using data::ExampleBatch;
using train::ExampleSource;

std::unique_ptr<ExampleSource> Open(const std::string& path,
                                    const std::string& format, bool strict,
                                    uint32_t worker_id, uint32_t num_workers,
                                    const std::string& split,
                                    const std::string& csv_columns) {
  train::SourceOptions options;
  ThrowIfError(data::ParseDataFormat(format, &options.format));
  options.csv_spec = csv_columns;
  options.split = ValueOrThrow(train::DataSplitFromName(split));
  options.strict = strict;
  if (num_workers == 0 || worker_id >= num_workers) {
    ThrowInvalidArgument(
        "worker_id " + std::to_string(worker_id) +
        " is not in [0, num_workers = " + std::to_string(num_workers) + ")");
  }
  options.worker_id = worker_id;
  options.num_workers = num_workers;
  py::gil_scoped_release release;
  return ValueOrThrow(ExampleSource::Open(path, options));
}

// Up to `max` examples as (labels, offsets, ids, values, fields); empty
// arrays at the end of the file.
py::tuple Read(ExampleSource& source, size_t max) {
  ExampleBatch batch;
  ExampleSource::Scratch scratch;
  ReleasedValue<size_t>([&] { return source.Next(max, &batch, &scratch); });
  return py::make_tuple(
      ToArray(std::move(batch.labels)), ToArray(std::move(batch.offsets)),
      ToArray(std::move(batch.ids)), ToArray(std::move(batch.values)),
      ToArray(std::move(batch.fields)));
}

py::dict StatsOf(const ExampleSource& source) {
  const data::ReaderStats s = source.stats();
  py::dict d;
  d["lines"] = s.lines;
  d["examples"] = s.examples;
  d["malformed"] = s.malformed;
  d["first_malformed"] = s.first_malformed;
  return d;
}

// Scores and labels as float32 spans of one length.
std::pair<std::span<const float>, std::span<const float>> Pairs(
    const py::array& scores, const py::array& labels) {
  auto s = FloatInput(scores, "scores");
  auto l = FloatInput(labels, "labels");
  if (s.size() != l.size()) {
    ThrowInvalidArgument(std::to_string(s.size()) + " scores for " +
                         std::to_string(l.size()) + " labels");
  }
  return {s, l};
}

}  // namespace

void BindData(py::module_ m) {
  py::class_<ExampleSource>(m, "ExampleSource")
      .def(py::init(&Open), py::arg("path"), py::arg("format"),
           py::arg("strict"), py::arg("worker_id"), py::arg("num_workers"),
           py::arg("split"), py::arg("csv_columns"))
      .def("read", &Read, py::arg("max"))
      .def(
          "skip",
          [](ExampleSource& s, uint64_t lines) {
            Released([&] { return s.Skip(lines); });
          },
          py::arg("lines"))
      .def("rewind",
           [](ExampleSource& s) { Released([&] { return s.Rewind(); }); })
      .def_property_readonly("consumed", &ExampleSource::consumed)
      .def_property_readonly("fields",
                             [](const ExampleSource& s) -> py::object {
                               if (s.format().csv() == nullptr)
                                 return py::none();
                               return py::cast(s.format().csv()->field_names());
                             })
      .def_property_readonly("fraction_read", &ExampleSource::fraction_read)
      .def_property_readonly("stats", &StatsOf)
      .def_property_readonly("path", &ExampleSource::path)
      .def_property_readonly("split", [](const ExampleSource& s) {
        return std::string(train::DataSplitName(s.split()));
      });

  m.def(
      "auc",
      [](const py::array& scores, const py::array& labels) {
        auto [s, l] = Pairs(scores, labels);
        return eval::Auc(s, l);
      },
      py::arg("scores"), py::arg("labels"));
  m.def(
      "logloss",
      [](const py::array& probabilities, const py::array& labels) {
        auto [p, l] = Pairs(probabilities, labels);
        return eval::LogLoss(p, l);
      },
      py::arg("probabilities"), py::arg("labels"));
  m.def(
      "normalized_entropy",
      [](const py::array& probabilities, const py::array& labels) {
        auto [p, l] = Pairs(probabilities, labels);
        return eval::NormalizedEntropy(eval::LogLoss(p, l),
                                       eval::PositiveRate(l));
      },
      py::arg("probabilities"), py::arg("labels"));
}

}  // namespace ps::python
