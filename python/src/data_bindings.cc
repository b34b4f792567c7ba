// ps._native.data: the C++ click-log readers (worker/data/example_reader.h)
// and the metrics (worker/eval/metrics.h), so a PyTorch model reads the same
// files, with the same feature hashing, as ps_worker does, at C++ speed, and
// is scored by the same AUC.
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
#include "worker/data/example_reader.h"
#include "worker/eval/metrics.h"

namespace ps::python {
namespace {

using data::ExampleBatch;
using data::ExampleReader;

std::unique_ptr<ExampleReader> Open(const std::string& path,
                                    const std::string& format, bool strict) {
  data::ReaderOptions options;
  ThrowIfError(data::ParseDataFormat(format, &options.format));
  options.strict = strict;
  py::gil_scoped_release release;
  return ValueOrThrow(ExampleReader::Open(path, options));
}

// Up to `max` examples as (labels, offsets, ids, values, fields); empty
// arrays at the end of the file.
py::tuple Read(ExampleReader& reader, size_t max) {
  ExampleBatch batch;
  StatusOr<size_t> got = size_t{0};
  {
    py::gil_scoped_release release;
    got = reader.Read(max, &batch);
  }
  ThrowIfError(got.status());
  return py::make_tuple(
      ToArray(std::move(batch.labels)), ToArray(std::move(batch.offsets)),
      ToArray(std::move(batch.ids)), ToArray(std::move(batch.values)),
      ToArray(std::move(batch.fields)));
}

py::dict StatsOf(const ExampleReader& reader) {
  const data::ReaderStats& s = reader.stats();
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
  py::class_<ExampleReader>(m, "ExampleReader")
      .def(py::init(&Open), py::arg("path"), py::arg("format"),
           py::arg("strict"))
      .def("read", &Read, py::arg("max"))
      .def(
          "skip",
          [](ExampleReader& r, uint64_t examples) {
            Status s;
            {
              py::gil_scoped_release release;
              s = r.Skip(examples);
            }
            ThrowIfError(s);
          },
          py::arg("examples"))
      .def_property_readonly("stats", &StatsOf)
      .def_property_readonly("path", &ExampleReader::path);

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
}

}  // namespace ps::python
