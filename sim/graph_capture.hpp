#pragma once
// Which CUDA-graph capture sizes the engine behind a replica's preset pads
// its steps to, and the largest one, as each engine sets it by default
// (docs/engines.md): vLLM captures min(2 x max_num_seqs, 512) tokens' worth
// of steps, mixed ones too; SGLang captures decode batches up to a
// cuda_graph_max_bs that grows with the GPU's memory and the TP size, never
// above max_running_requests. A replica knob graph_capture_max_tokens >= 0
// overrides the largest size (0: eager, as --enforce-eager).
#include "engine/core/replica.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/step_ops.hpp"

namespace twin {

GraphCapture graph_capture_for(const ReplicaConfig& replica, const HardwareDesc& hw, int tp);

}  // namespace twin
