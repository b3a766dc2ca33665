#include "sim/host_work.hpp"

#include <algorithm>
#include <string_view>

namespace twin {
namespace {

// One engine's host work per item, in microseconds on the hosts its
// published profiles ran on. Every figure's source is in docs/op-costs.md
// ("Host work per step"); the tags are those of docs/hardware.md.
struct EngineHostFigures {
  std::string_view preset;
  double per_seq_us;
  double per_token_us;
  double per_sample_us;
  double exposed_us;
};

constexpr EngineHostFigures kEngines[] = {
    // vLLM v1 (0.11-0.19). per_sample: Scheduler.update_from_output on
    // decode batches, 0.287 ms at 256 requests and 0.142 ms at 128 (vLLM
    // PR #46112's micro-benchmark): 1.1 us per sampling request (D).
    // per_seq: schedule() and the persistent batch's per-request updates,
    // taken as about one update_from_output each (E). per_token: input
    // preparation is vectorised over tokens (numpy), 0.05 us (E).
    // exposed: 0, under async scheduling input preparation and sampling
    // overlap the forward pass (vLLM PR #23569) (R).
    {"vllm", 2.0, 0.05, 1.1, 0.0},
    // vLLM v0: sampling, input preparation, output processing and the
    // scheduler together about 20 ms per step at batch 200 (vLLM issue
    // #6801): 100 us per sequence (D), split evenly between per-sequence
    // and per-sample work (E: no split published). Python lists per token
    // in prepare_input: 0.2 us (E).
    {"vllm-v0", 50.0, 0.2, 50.0, 0.0},
    // SGLang: no published per-request figure; a Python scheduler over a
    // persistent batch as vLLM v1's, so vLLM v1's figures (E). Its overlap
    // scheduler leaves no GPU idle time between decode batches (SGLang
    // v0.4 blog's Nsight profile): exposed 0 (R).
    {"sglang", 2.0, 0.05, 1.1, 0.0},
    // TensorRT-LLM (PyTorch executor): host_step_time 45.11 ms per
    // iteration at max_batch_size 1536 per attention-DP rank (TensorRT-LLM
    // PR #10273, GB200, GPT-OSS-120B): 29 us per sequence, all of the
    // step's host work (D; no split into sampling published, so all per
    // sequence). Overlap scheduler: exposed 0 (R, its docs).
    {"trtllm", 29.0, 0.05, 0.0, 0.0},
};

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
  const auto it = std::find_if(std::begin(kEngines), std::end(kEngines),
                               [&](const EngineHostFigures& e) { return e.preset == config.preset; });
  if (it == std::end(kEngines)) return flat_host_work(hw);
  const double speed = hw.host_speed > 0 ? hw.host_speed : 1.0;
  HostWork w;
  w.engine = std::string(it->preset);
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
