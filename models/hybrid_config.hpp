#pragma once
// Reading the 2026 model families' config.json (issue 41): Gemma 3,
// Llama 4, Qwen3-Next, Nemotron-H and GLM-4.5 (glm4_moe), with Hugging
// Face's (and vLLM's) field names. Used by model_loader only.
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_desc.hpp"

namespace twin {

// The config as the common readers read it: a multimodal config's
// text_config (Gemma 3, Llama 4) with the top-level name, hf_id,
// quantization and dtype keys; Hugging Face's class defaults for the keys
// those configs leave out; and the keys renamed where a family spells a
// common field its own way (Llama 4's expert width is intermediate_size and
// its dense MLP's intermediate_size_mlp; Qwen3-Next's num_experts). Other
// configs come back unchanged.
nlohmann::json hybrid_config_view(const nlohmann::json& j, const std::string& origin);

// After the common readers: the per-layer mixers and MLPs, the linear
// attention and Mamba-2 fields, and the families' flags (q/k norms, the
// output gate, relu2 MLPs). A key with a value we do not model is refused
// naming it.
void read_hybrid_layers(const nlohmann::json& j, const std::string& origin, ModelDesc& m);

}  // namespace twin
