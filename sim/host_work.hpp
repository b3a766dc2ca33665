#pragma once
// The serving engine's host (CPU) work per step: scheduling, input
// preparation, sampling and output processing, as a function of the batch,
// and how much of it the engine hides behind the GPU. A step's time is
//   overlapped (async scheduling, back to back):  max(gpu, host) + exposed
//   otherwise (synchronous engine, or the first step after an idle gap,
//   whose host work has no earlier GPU step to hide behind):  gpu + host + exposed
// with host = fixed + per_seq x sequences + per_token x tokens + per_sample x
// sampling sequences. The figures are the engine's (the scheduler preset's),
// from that engine's published profiles, over the hardware profile's
// host_speed; the fixed term is the profile's step_overhead_us. Where each
// figure comes from: docs/op-costs.md, "Host work per step"; the figures
// themselves are each engine's row of sim/engine_traits.cpp.
#include <cstdint>
#include <string>

#include "base/types.hpp"
#include "engine/core/scheduler_config.hpp"
#include "hwprofiles/hardware_desc.hpp"

namespace twin {

// Plain figures, in ns, so a fit can set any of them.
struct HostWork {
  double fixed_ns = 0;       // per step
  double per_seq_ns = 0;     // per scheduled sequence
  double per_token_ns = 0;   // per scheduled (new) token
  double per_sample_ns = 0;  // per sequence that samples this step
  double exposed_ns = 0;     // per step, never overlapped
  bool overlap = false;      // the engine runs this step's host work beside the previous step's GPU work
  std::string engine;        // whose figures ("vllm", ...; "flat": the profile's step_overhead_us alone)
};

// The host work of one step, split as the composition needs it.
struct HostCost {
  double host_ns = 0;     // fixed + the per-item terms (overlappable)
  double exposed_ns = 0;  // never overlapped
  bool overlapped = false;  // this step hid host_ns behind the GPU
};

// The profile's step_overhead_us alone, added to every step: what every
// step cost before host work was modelled, and what presets without an
// engine of their own (sarathi, orca, static, dynamic, lightllm) keep.
HostWork flat_host_work(const HardwareDesc& hw);

// The engine a preset stands for (vllm: vLLM v1; vllm-v0; sglang; trtllm)
// on this host: its per-item figures over hw.host_speed (or the profile's
// own host_per_*_us where set), the fixed term the profile's
// step_overhead_us, overlapped when `config.async_scheduling` is on. Other
// presets: flat_host_work.
HostWork host_work_for(const SchedulerConfig& config, const HardwareDesc& hw);

// The step's host cost: `seqs` scheduled sequences with `tokens` new
// tokens, `samples` of them sampling; `idle_ns` > 0 (the stage sat idle
// before the step) means no earlier GPU step to hide it behind.
HostCost host_cost(const HostWork& w, std::int64_t seqs, std::int64_t tokens, std::int64_t samples, Time idle_ns);

// The step's time from its GPU time and host cost (the formula above).
double compose_step_ns(double gpu_ns, const HostCost& c);

}  // namespace twin
