#pragma once
// Python-defined policies (docs/python.md, "Python policies"): a router and
// a queue-order key function written in Python, called by the core through
// its plug-in interfaces (engine/core/policy.hpp). Both are registered once,
// at import, under the name "python"; a run names them (--router python,
// --queue-order python) and PolicyFunctions says which functions they call
// while it lasts. The run itself holds no GIL: each call takes it, builds
// the arguments, calls, and releases it.
#include <pybind11/pybind11.h>

namespace twin::python {

namespace py = pybind11;

inline constexpr const char* kPythonPolicy = "python";

// Adds the "python" router and queue order to the core's registries.
void register_python_policies();

// The functions the "python" policies call during one run (None: that
// policy is not used; naming it then is a usage error). One run at a time,
// as twinserve.simulate is. Constructed and destroyed with the GIL held.
class PolicyFunctions {
 public:
  PolicyFunctions(py::object router, py::object queue_order);
  ~PolicyFunctions();
  PolicyFunctions(const PolicyFunctions&) = delete;
  PolicyFunctions& operator=(const PolicyFunctions&) = delete;

 private:
  py::object router_, queue_order_;
};

}  // namespace twin::python
