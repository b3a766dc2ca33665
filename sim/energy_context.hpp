#pragma once
// What the summary needs of a cluster's power (metrics/energy.hpp): every
// placed device's idle draw and price, or why the energy is not known.
#include "metrics/energy.hpp"
#include "sim/cluster.hpp"

namespace twin {

// Call before the replicas' specs move into a simulator. `end` is left 0.
EnergyContext energy_context(const Cluster& cluster);

}  // namespace twin
