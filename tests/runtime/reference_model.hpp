#pragma once
// A naive dense transformer in plain loops, the oracle the runtime is checked
// against: no paging, no batching, no BLAS. Weights by Hugging Face name.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/runtime/model_config.hpp"

namespace twin::test {

using WeightMap = std::map<std::string, std::vector<float>>;

// Seeded random weights for every tensor the config needs (HF names), scaled
// like the runtime's random init so activations stay sane.
WeightMap random_weights(const ModelConfig& config, std::uint64_t seed);

// Writes weights as one model.safetensors in `dtype` ("F32", "F16", "BF16")
// plus a config.json into dir (created). Returns dir.
std::string write_checkpoint(const std::string& dir, const ModelConfig& config, const WeightMap& weights,
                             const std::string& dtype = "F32");

// Logits [tokens.size(), vocab] of every position of one sequence.
std::vector<std::vector<float>> reference_logits(const ModelConfig& config, const WeightMap& weights,
                                                 const std::vector<std::int32_t>& tokens);

// The tiny test model (models/descriptors/tiny.json's shape), optionally with
// QKV bias, tied embeddings or experts; config.qk_norm set after it gives
// Qwen3's per-head q/k norms (written as model_type qwen3).
ModelConfig tiny_config(bool bias = false, bool tied = false, std::int64_t experts = 0);

// A temp folder unique to this process and name.
std::string temp_dir(const std::string& name);

}  // namespace twin::test
