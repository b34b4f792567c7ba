// ps._native: the extension module behind the Python package (python/ps).
// Each part binds one C++ library; the package's Python files put a
// friendlier face on them (names for tables, outputs allocated, torch
// tensors accepted).
#include <glog/logging.h>
#include <pybind11/pybind11.h>

#include "python/src/bindings.h"
#include "python/src/status_error.h"

PYBIND11_MODULE(_native, m) {
  m.doc() = "Bindings of the ps C++ libraries; use the ps package instead.";
  // The libraries log through glog (connections, lost peers): to stderr,
  // at the level $GLOG_minloglevel says (glog reads GLOG_* variables).
  if (!google::IsGoogleLoggingInitialized()) {
    FLAGS_logtostderr = true;
    google::InitGoogleLogging("ps-python");
  }
  ps::python::RegisterStatusErrors();
  ps::python::BindClient(m.def_submodule("client", "client: PsClient"));
  ps::python::BindServing(
      m.def_submodule("serving", "serving: ServingClient (ps_serve lookups)"));
  ps::python::BindData(
      m.def_submodule("data", "worker/data readers, worker/eval metrics"));
  ps::python::BindXfer(
      m.def_submodule("xfer", "core: the one-sided transfer library"));
}
