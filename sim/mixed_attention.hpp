#pragma once
// How the engine behind a replica's preset runs the attention of a step
// that mixes a prefill chunk with decodes (docs/engines.md, "Mixed steps"):
// vLLM's FlashAttention backend, its default where compute capability is
// 8.x (Ampere, Ada) or 12.x (the RTX Blackwell cards), makes one varlen
// kernel call of the whole batch, and that kernel tiles each head's queries
// 64 rows at a time, so a decode's one query costs a 64-row tile over its
// context, and its grid holds a block per seq, query head and 64-row tile
// of the longest chunk, so a decode also takes the time of the blocks past
// its one row (HardwareDesc::mixed_attention_block_ns each, priced by
// RooflineCostModel::merge_mixed_attention); a decode-only batch takes
// the kernel's split-KV decode path instead. Elsewhere (FlashAttention-3 on Hopper, FlashInfer on datacenter
// Blackwell, SGLang, TensorRT-LLM) prefill and decode attention run apart:
// 0. A replica knob mixed_attention_rows >= 0 overrides it.
#include <cstdint>

#include "engine/core/replica.hpp"
#include "hwprofiles/hardware_desc.hpp"

namespace twin {

// Query rows a decode is padded to in a mixed step's one attention call; 0:
// the engine prices prefill and decode attention as two calls.
std::int32_t mixed_attention_rows_for(const ReplicaConfig& replica, const HardwareDesc& hw);

}  // namespace twin
