#pragma once
// The virtual clock's pricing of each replica from the simulator's specs,
// with the checks a spec must pass (an acceptance model where it
// speculates, a tier model where it has KV tiers).
#include <vector>

#include "sim/simulator.hpp"
#include "sim/virtual_clock.hpp"

namespace twin {

// UsageError naming what is missing.
std::vector<VirtualClock::Pricing> pricing_of(const std::vector<SimReplicaSpec>& specs);

}  // namespace twin
