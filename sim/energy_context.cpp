#include "sim/energy_context.hpp"

namespace twin {

EnergyContext energy_context(const Cluster& cluster) {
  EnergyContext e;
  e.unknown.clear();
  for (const GroupPlan& g : cluster.groups) {
    if (!g.hardware.power.known) {
      e.unknown = "hardware profile " + g.hardware.name + " has no power figures (docs/hardware.md, \"Power\")";
      return e;
    }
    double gpus = 0;
    for (const auto& r : g.replica_gpus) gpus += static_cast<double>(r.size());
    e.idle_power_w += gpus * g.hardware.power.idle_w;
    e.price_per_hour += gpus * g.hardware.price_per_gpu_hour;
  }
  for (const SimReplicaSpec& r : cluster.replicas) {
    if (!r.cost_model || !r.cost_model->splits_steps()) {
      e.unknown = "the cost model does not split a step into compute- and memory-bound time (replay)";
      return e;
    }
  }
  return e;
}

}  // namespace twin
