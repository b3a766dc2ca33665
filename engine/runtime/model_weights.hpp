#pragma once
// The transformer's weights in backend memory, laid out for the forward pass:
// Q, K and V fused into one projection (one GEMM), gate and up fused into one
// [2I, H] matrix (the layout silu_and_mul and moe_experts expect). Internal to
// the runtime.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.hpp"
#include "engine/runtime/model_config.hpp"

namespace twin {

struct LayerWeights {
  TensorView input_norm;     // [1, H]
  TensorView qkv;            // [q_dim + 2 kv_dim, H]
  TensorView qkv_bias;       // [1, q_dim + 2 kv_dim] or empty (data == nullptr)
  TensorView q_norm, k_norm; // Qwen3: [1, head_dim] each, or empty
  TensorView o;              // [H, q_dim]
  TensorView post_norm;      // [1, H]
  TensorView gate_up;        // dense: [2I, H]
  TensorView down;           // dense: [H, I]
  // Quantised (WeightOptions::quantization): the four projections above are
  // i8 (int8) or f8e4m3 (fp8) and these their [1, rows] f32 per-channel
  // scales; empty (data == nullptr) otherwise.
  TensorView qkv_scales, o_scales, gate_up_scales, down_scales;
  TensorView router;         // MoE: [E, H]
  std::vector<TensorView> expert_gate_up;  // MoE: E x [2I, H]
  std::vector<TensorView> expert_down;     // MoE: E x [H, I]
  // Weight-only int8: the experts' [1, rows] f32 per-channel scales (E
  // each); empty otherwise.
  std::vector<TensorView> expert_gate_up_scales, expert_down_scales;
};

struct ModelWeights {
  Buffer storage;
  TensorView embed;       // [V, H]
  TensorView final_norm;  // [1, H]
  TensorView lm_head;     // [V, H]; the embedding when tied
  std::vector<LayerWeights> layers;
  std::int64_t bytes = 0;  // parameter bytes as stored (a tied head counted once)
};

struct WeightOptions {
  std::string dir;         // safetensors folder; empty: random weights
  std::uint64_t seed = 0;  // random weights
  // Storage dtype: "auto" keeps a checkpoint's f32 / bf16 (f16 becomes f32;
  // random weights are f32), or f32 / bf16 in any spelling of
  // models/dtype.hpp (float32, float, bfloat16, ...) to convert.
  std::string dtype = "auto";
  // vLLM's --quantization: "" (none), "int8" or "fp8": the projections (qkv,
  // o, gate_up, down) quantised at load with one f32 scale per output
  // channel, whatever the source: int8 symmetric (scale = max |w| / 127,
  // weight-only, the cpu backend; MoE experts too), or fp8 E4M3 (scale =
  // max |w| / 448; W8A8: activations scaled per token at each GEMM; dense
  // models). The embedding, LM head and norms keep `dtype`.
  std::string quantization;
};

// How a --quantization value is described in the engine's one-line
// summaries: "int8 weight-only projections", "fp8 W8A8 projections".
std::string quantization_label(const std::string& quantization);

// The engine's storage type for a --dtype or --kv-cache-dtype value in the
// one dtype vocabulary (models/dtype.hpp): "auto", "f32" or "bf16". Types
// the engine does not store are UsageError naming `flag`: fp16 (a
// checkpoint's f16 is widened to f32; pick f32 or bf16), fp8 and int8 (not
// implemented on any backend yet).
std::string engine_storage_dtype(const std::string& text, const std::string& flag);

// Loads or initialises every weight of `config` into backend memory. Missing
// tensors, wrong shapes or unsupported dtypes throw twin::Error naming the
// tensor and both shapes.
ModelWeights load_model_weights(Backend& backend, const ModelConfig& config, const WeightOptions& options);

}  // namespace twin
