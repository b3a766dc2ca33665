#include "sim/host_work.hpp"

#include <algorithm>

#include "sim/engine_traits.hpp"

namespace twin {
namespace {

// A profile's own figure where set (>= 0), else the engine's over the host's speed.
double pick_ns(double profile_us, double engine_us, double host_speed) {
  return profile_us >= 0 ? profile_us * 1e3 : engine_us * 1e3 / host_speed;
}

}  // namespace

HostWork flat_host_work(const HardwareDesc& hw) {
  HostWork w;
  w.fixed_ns = hw.step_overhead_us * 1e3;
  w.engine = "flat";
  return w;
}

HostWork host_work_for(const SchedulerConfig& config, const HardwareDesc& hw) {
  // The engine's figures and their sources: sim/engine_traits.cpp.
  const EngineTraits* engine = engine_traits(config.preset);
  if (!engine) return flat_host_work(hw);
  const EngineHostFigures* it = &engine->host;
  const double speed = hw.host_speed > 0 ? hw.host_speed : 1.0;
  HostWork w;
  w.engine = std::string(engine->preset);
  // The fixed term is the profile's: the node's, fitted with it.
  w.fixed_ns = hw.step_overhead_us * 1e3;
  w.per_seq_ns = pick_ns(hw.host_per_seq_us, it->per_seq_us, speed);
  w.per_token_ns = pick_ns(hw.host_per_token_us, it->per_token_us, speed);
  w.per_sample_ns = pick_ns(hw.host_per_sample_us, it->per_sample_us, speed);
  w.exposed_ns = pick_ns(hw.host_exposed_us, it->exposed_us, speed);
  w.overlap = config.async_scheduling;
  return w;
}

HostCost host_cost(const HostWork& w, std::int64_t seqs, std::int64_t tokens, std::int64_t samples, Time idle_ns) {
  HostCost c;
  c.host_ns = w.fixed_ns + w.per_seq_ns * static_cast<double>(seqs) + w.per_token_ns * static_cast<double>(tokens) +
              w.per_sample_ns * static_cast<double>(samples);
  c.exposed_ns = w.exposed_ns;
  c.overlapped = w.overlap && idle_ns == 0;
  return c;
}

double compose_step_ns(double gpu_ns, const HostCost& c) {
  return (c.overlapped ? std::max(gpu_ns, c.host_ns) : gpu_ns + c.host_ns) + c.exposed_ns;
}

}  // namespace twin
