#pragma once
// `simulate --explain-ops`: what each group's cost model charges for a few
// step shapes, op by op, and which efficiency curve priced each op.
#include <string>

#include "sim/cluster.hpp"

namespace twin {

// `shapes`: comma-separated steps; "P" is one prompt of P tokens (no
// cache), "BxC" is B decodes each after C cached tokens, and parts joined
// by '+' share one step ("1920+128x1024", a chunk beside decodes).
// UsageError for anything else.
// Prices the first pipeline stage of each group's first replica.
std::string explain_ops(Cluster& cluster, const std::string& shapes);

}  // namespace twin
