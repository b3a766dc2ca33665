#pragma once
// Times one op of models/step_ops by running the call of the forward
// program that runs it in a step (models/forward_program: call_of), through
// the runner's own run_call, on the model's own weights (loaded or random):
// a timed op is exactly what a step runs. rmsnorm is a layer's input norm
// (plain on layer 0, fused with the residual add after), attn_prefill and
// attn_decode the attention call on prefill-only or decode-only seqs. The
// one exception is a MoE's expert GEMMs and their silu * up, which a step
// runs fused in one moe_experts call: they are timed apart, one GEMM per
// touched expert on its share of the rows.
// Per-layer ops cycle over the layers' weights when one call is short, so
// weights stream from memory as in a real step rather than sitting in cache.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/backend.hpp"
#include "engine/profiler/op_timer.hpp"
#include "engine/runtime/model_config.hpp"
#include "engine/runtime/model_runner.hpp"
#include "models/step_ops.hpp"

namespace twin {

struct OpBenchOptions {
  // The engine the ops run on: backend, threads, weights (or seed), dtypes;
  // its KV-sizing fields are unused (the bench carves its own cache).
  RunnerOptions engine;
  std::int64_t max_tokens = 4096;  // activation rows to allocate
  std::int64_t max_seqs = 256;     // sampling rows to allocate
  std::int32_t block_size = 16;
};

class OpBench {
 public:
  OpBench(const ModelConfig& config, const OpBenchOptions& options);
  ~OpBench();
  OpBench(const OpBench&) = delete;
  OpBench& operator=(const OpBench&) = delete;

  // Times one instance of `op` (step_ops' shape: prefill ops must hold one
  // seq). Throws twin::Error for an op this bench cannot run (collectives,
  // MoE) or a shape beyond what was allocated.
  TimingStats time(const Op& op, const TimingPolicy& policy);

  DeviceInfo device_info() const;
  std::string backend_name() const;
  std::string weight_dtype_name() const;  // f32 or bf16
  std::string kv_dtype_name() const;      // f32, bf16 or fp8_e4m3

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace twin
