#include "python/src/bindings.h"

namespace ps::python {

void BindClient(pybind11::module_ m) { (void)m; }

}  // namespace ps::python
