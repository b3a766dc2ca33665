#include "engine/backend/backend.hpp"

#include "base/error.hpp"

namespace twin {

// A backend without step graphs (supports_step_graphs() false) is never
// asked for a pass; a caller that asks anyway gets the reason.
void Backend::begin_step_graph(const StepGraphKey&, StepGraphPass) {
  throw Error(name() + " backend: step graphs (CUDA graphs) are not supported");
}

void Backend::end_step_graph() { throw Error(name() + " backend: step graphs (CUDA graphs) are not supported"); }

}  // namespace twin
