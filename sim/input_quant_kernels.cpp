#include "sim/input_quant_kernels.hpp"

namespace twin {

OpKindSet separate_input_quant(const SchedulerConfig& config, const WeightPrecision& weights) {
  if (!weights.quantized() || weights.quant.weight_only || weights.quant.gemm_dtype != Dtype::fp8) return 0;
  constexpr OpKindSet all_four = op_kind_bit(OpKind::qkv_proj) | op_kind_bit(OpKind::o_proj) |
                                 op_kind_bit(OpKind::gate_up_proj) | op_kind_bit(OpKind::down_proj);
  // vLLM v1 compiles the model with Inductor: its fusion passes (and
  // Inductor's own fusion on NVIDIA) put the quantisation of RMSNorm's and
  // SiLU-and-mul's outputs into those kernels; the attention output's
  // (fuse_attn_quant) is off at every optimisation level, so o_proj's input
  // is quantised by a kernel of its own (vLLM docs/design/fusions.md).
  if (config.preset == "vllm") return op_kind_bit(OpKind::o_proj);
  // vLLM v0 and SGLang run the fp8 linear method eagerly: scaled_fp8_quant
  // (vLLM) / per-token quant (SGLang) before every fp8 GEMM.
  if (config.preset == "vllm-v0" || config.preset == "sglang") return all_four;
  // TensorRT-LLM fuses the quantisation into its RMSNorm, attention and
  // activation kernels; the other presets keep the GEMM-only price.
  return 0;
}

}  // namespace twin
