#pragma once
// The human summary printed at the end of a run, in the spirit of vLLM's
// benchmark_serving result block.
#include <iosfwd>

#include "metrics/summary.hpp"

namespace twin {

void print_summary_table(std::ostream& out, const Summary& summary);

}  // namespace twin
