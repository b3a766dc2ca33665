#include "sim/input_quant_kernels.hpp"

#include "sim/engine_traits.hpp"

namespace twin {

OpKindSet separate_input_quant(const SchedulerConfig& config, const WeightPrecision& weights) {
  if (!weights.quantized() || weights.quant.weight_only || weights.quant.gemm_dtype != Dtype::fp8) return 0;
  // Which engine fuses where, with its source: sim/engine_traits.cpp.
  const EngineTraits* engine = engine_traits(config.preset);
  return engine ? engine->separate_fp8_input_quant : 0;
}

}  // namespace twin
