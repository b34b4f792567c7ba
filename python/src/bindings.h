// The parts of the extension module ps._native, one per C++ library bound;
// each defined in its own file (client_bindings.cc, ...).
#pragma once

#include <pybind11/pybind11.h>

namespace ps::python {

void BindClient(pybind11::module_ m);   // client
void BindServing(pybind11::module_ m);  // serving
void BindData(pybind11::module_ m);     // worker/data, worker/eval
void BindXfer(pybind11::module_ m);     // core

}  // namespace ps::python
