#pragma once
// Runs the backend kernels the model runner issues for one op of
// models/step_ops, on the model's own weights (loaded or random), so a timed
// op is exactly what a step runs. The mapping from step_ops to kernels:
//   qkv_proj, o_proj, gate_up_proj, down_proj: gemm on the layer's weights
//   lm_head: gemm on the LM head;  embed: embedding
//   rmsnorm: add_rmsnorm (the fused residual step of every layer)
//   rotary, silu_mul: rotary, silu_and_mul
//   attn_prefill / attn_decode: kv_write of the new tokens + paged_attention
//   final_norm: the last residual add over all tokens
//   sample: gather of the sampling rows, their final rmsnorm, and sample
// Per-layer ops cycle over the layers' weights when one call is short, so
// weights stream from memory as in a real step rather than sitting in cache.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/backend.hpp"
#include "engine/profiler/op_timer.hpp"
#include "engine/runtime/model_config.hpp"
#include "models/step_ops.hpp"

namespace twin {

struct OpBenchOptions {
  std::string backend = "cpu";
  std::int32_t threads = 0;   // CPU worker threads; <= 0: the backend's default
  std::string weights_dir;    // empty: random weights from seed
  std::string weight_dtype = "auto";
  std::string kv_cache_dtype = "auto";  // as RunnerOptions: auto is the weights' dtype
  std::uint64_t seed = 0;
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
  std::string kv_dtype_name() const;      // f32 or bf16

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace twin
