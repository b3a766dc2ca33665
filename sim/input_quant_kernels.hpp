#pragma once
// Which W8A8 fp8 linear layers an engine feeds through an activation
// quantisation kernel of their own. A W8A8 GEMM reads 8-bit activations;
// the bf16 output of the op before it is quantised (a scale per token and
// the fp8 values) either inside that op's kernel (fused) or by a separate
// kernel that reads the bf16 rows and writes the fp8 ones. The separate
// kernel costs a launch and a pass over the rows on every step, which at
// small batches is a visible share of a decode step (issue 38: fp8 steps
// priced too fast). Where each engine fuses and where not, with the files
// it was read from: docs/engines.md, "fp8 activation quantisation"; the
// set per engine is its row of sim/engine_traits.cpp.
#include <cstdint>

#include "engine/core/scheduler_config.hpp"
#include "models/quantization.hpp"
#include "models/step_ops.hpp"

namespace twin {

// A set of op kinds, one bit per OpKind.
using OpKindSet = std::uint32_t;
static_assert(kNumOpKinds <= 32, "OpKindSet holds one bit per op kind");
constexpr OpKindSet op_kind_bit(OpKind kind) { return OpKindSet{1} << static_cast<int>(kind); }

// The dense linear layers (qkv_proj, o_proj, gate_up_proj, down_proj)
// whose fp8 input the engine the preset stands for quantises separately:
// vllm (v1, torch.compile): o_proj only (attention output; RMSNorm and
// SiLU-and-mul fuse their quantisation); vllm-v0 and sglang (no graph
// compiler): all four; trtllm and presets without an engine: none. Empty
// unless `weights` are W8A8 fp8 (other formats: not modelled, said in
// docs/engines.md).
OpKindSet separate_input_quant(const SchedulerConfig& config, const WeightPrecision& weights);

}  // namespace twin
