#include "python/src/bindings.h"

namespace ps::python {

void BindData(pybind11::module_ m) { (void)m; }

}  // namespace ps::python
