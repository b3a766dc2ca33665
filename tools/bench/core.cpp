// Cost of the serving core's plan + complete per step and per scheduled
// sequence, at batch sizes 1..256, in steady state. Prints figures only.
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "engine/core/replica.hpp"

namespace {

using twin::Replica;
using twin::ReplicaConfig;
using twin::Request;
using twin::Time;

Request make(twin::RequestId id, std::int32_t prompt, std::int32_t output) {
  Request r;
  r.id = id;
  r.prompt_len = prompt;
  r.output_len = output;
  return r;
}

struct Figures {
  double ns_per_step = 0;
  double ns_per_seq = 0;
  double seqs_per_step = 0;
};

// decode_heavy: `batch` requests that never finish within the run.
// mixed: requests of 256-token prompts and 64 outputs, replaced as they end,
// so every step carries decodes and a prefill now and then.
Figures run(std::int32_t batch, bool mixed) {
  ReplicaConfig cfg = twin::replica_preset("vllm");
  cfg.kv.num_blocks = 1 << 20;
  cfg.kv.enable_prefix_caching = mixed;
  cfg.scheduler.max_num_seqs = batch;
  cfg.scheduler.max_model_len = 1 << 20;
  Replica rep(cfg, 0);
  twin::RequestId next = 0;
  const std::int32_t prompt = mixed ? 256 : 128;
  const std::int32_t output = mixed ? 64 : 1 << 19;
  for (std::int32_t i = 0; i < batch; ++i) rep.add(make(next++, prompt, output), 0);
  Time now = 0;
  auto one_step = [&] {
    const twin::StepPlan p = rep.plan(now);
    now += 1000;
    rep.complete(p, {}, now);
    const auto done = rep.take_finished();
    for (std::size_t k = 0; k < done.size(); ++k) rep.add(make(next++, prompt, output), now);
    return p.seqs.size();
  };
  for (int i = 0; i < 200; ++i) one_step();  // warm up to steady state
  const int steps = 20000;
  std::int64_t seqs = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) seqs += static_cast<std::int64_t>(one_step());
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  return {ns / steps, ns / static_cast<double>(seqs), static_cast<double>(seqs) / steps};
}

}  // namespace

int main() {
  std::printf("core: plan + complete (+ take_finished, re-add) in steady state, vllm preset\n");
  std::printf("%-13s %6s %12s %12s %10s\n", "workload", "batch", "ns/step", "ns/seq", "seqs/step");
  for (const bool mixed : {false, true}) {
    for (const std::int32_t batch : {1, 4, 16, 64, 128, 256}) {
      const Figures f = run(batch, mixed);
      std::printf("%-13s %6d %12.0f %12.1f %10.1f\n", mixed ? "mixed" : "decode_heavy", batch, f.ns_per_step,
                  f.ns_per_seq, f.seqs_per_step);
    }
  }
  return 0;
}
