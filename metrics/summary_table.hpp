#pragma once
// The human summary printed at the end of a run, in the spirit of vLLM's
// benchmark_serving result block.
#include <iosfwd>

#include "metrics/summary.hpp"

namespace twin {

void print_summary_table(std::ostream& out, const Summary& summary);
// The summary's warnings, one "warning: ..." line each (for stderr, so a
// pipe reading the table still sees them on the terminal).
void print_summary_warnings(std::ostream& out, const Summary& summary);

}  // namespace twin
