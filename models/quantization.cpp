#include "models/quantization.hpp"

#include <string>

#include "base/error.hpp"

namespace twin {

namespace {
struct Name {
  std::string_view text;
  QuantMethod method;
};
constexpr Name kNames[] = {
    {"none", QuantMethod::none}, {"fp8", QuantMethod::fp8},           {"awq", QuantMethod::awq},
    {"gptq", QuantMethod::gptq}, {"int8_w8a8", QuantMethod::int8_w8a8}, {"int8", QuantMethod::int8},
    {"mxfp4", QuantMethod::mxfp4}, {"nvfp4", QuantMethod::nvfp4},
};
}  // namespace

std::string_view quant_method_name(QuantMethod m) {
  for (const Name& n : kNames)
    if (n.method == m) return n.text;
  return "unknown";
}

QuantMethod parse_quant_method(std::string_view text) {
  if (text.empty()) return QuantMethod::none;
  for (const Name& n : kNames)
    if (text == n.text) return n.method;
  // vLLM's kernel-specific names for the same checkpoints.
  if (text == "awq_marlin") return QuantMethod::awq;
  if (text == "gptq_marlin") return QuantMethod::gptq;
  if (text == "modelopt_fp4") return QuantMethod::nvfp4;
  std::string known;
  for (const Name& n : kNames) known += (known.empty() ? "" : ", ") + std::string(n.text);
  throw UsageError("unknown quantization '" + excerpt(text, 40) + "'; expected one of: " + known +
                   " (awq_marlin and gptq_marlin are read as awq and gptq, modelopt_fp4 as nvfp4)");
}

std::string checkpoint_quant_method(std::string_view quant_method, std::string_view quant_algo) {
  if (quant_method == "fp8" || quant_method == "awq" || quant_method == "gptq" || quant_method == "mxfp4")
    return std::string(quant_method);
  if (quant_method == "modelopt_fp4") return "nvfp4";
  if (quant_method == "modelopt") {
    // ModelOpt writes the format in quant_algo (vLLM's ModelOptFp8Config
    // and ModelOptNvFp4Config); older exports spelled NVFP4 "FP4".
    if (quant_algo == "FP8") return "fp8";
    if (quant_algo == "NVFP4" || quant_algo == "FP4") return "nvfp4";
    throw UsageError("quantization_config.quant_algo '" + excerpt(quant_algo, 40) +
                     "' of a modelopt checkpoint is not priced; understood: FP8, NVFP4 (FP4)");
  }
  throw UsageError("quantization_config.quant_method '" + excerpt(quant_method, 40) +
                   "' is not priced; understood: fp8, awq, gptq, mxfp4, modelopt (quant_algo FP8 or NVFP4)");
}

QuantScheme quant_scheme(QuantMethod method, bool fp8_tensor_cores, bool int8_tensor_cores) {
  QuantHardware hw;
  hw.fp8 = fp8_tensor_cores;
  hw.int8 = int8_tensor_cores;
  return quant_scheme(method, hw);
}

namespace {

// MXFP4 as vLLM runs it (quantization/mxfp4.py): the experts only, always
// with 16-bit activations. Its W4A8 path (MXFP8 activations, opt-in by
// VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8) is not the default and not priced.
QuantScheme mxfp4_scheme(const QuantHardware& hw) {
  QuantScheme q;
  q.method = QuantMethod::mxfp4;
  q.weight_bits = 4;
  q.group_size = 32;
  q.scale_bytes = 1;  // e8m0
  q.experts_only = true;
  q.kernel = !hw.cuda ? "w4a16_mxfp4_triton" : hw.fp4 ? "w4a16_mxfp4_flashinfer" : "w4a16_mxfp4_marlin";
  return q;
}

// NVFP4 as vLLM runs it (quantization/modelopt.py): W4A4 where the GPU
// multiplies fp4 (activations quantised per 16 on the fly), else FP4 Marlin
// weight-only; both CUDA-only.
QuantScheme nvfp4_scheme(const QuantHardware& hw) {
  if (!hw.cuda) {
    throw UsageError("quantization nvfp4 (modelopt_fp4) has no kernel on " + hw.name +
                     ": vLLM's NVFP4 GEMMs (CUTLASS FP4, FP4 Marlin) are CUDA-only; use mxfp4 or fp8");
  }
  QuantScheme q;
  q.method = QuantMethod::nvfp4;
  q.weight_bits = 4;
  q.group_size = 16;
  q.scale_bytes = 1;         // fp8 e4m3
  q.tensor_scale_bytes = 8;  // fp32 weight_scale_2 and input_scale
  q.weight_only = !hw.fp4;
  if (hw.fp4) {
    q.gemm_dtype = Dtype::fp4;
    q.input_bytes = 0.5 + 1.0 / 16.0;
  }
  q.kernel = hw.fp4 ? "w4a4_nvfp4_cutlass" : "w4a16_nvfp4_marlin";
  return q;
}

}  // namespace

QuantScheme quant_scheme(QuantMethod method, const QuantHardware& hw) {
  const bool fp8_tensor_cores = hw.fp8, int8_tensor_cores = hw.int8;
  if ((method == QuantMethod::mxfp4 || method == QuantMethod::nvfp4) && !hw.gpu) {
    throw UsageError("quantization " + std::string(quant_method_name(method)) + " runs on GPUs only (" + hw.name +
                     " is a CPU): vLLM's CPU backend has no FP4 kernels");
  }
  if (method == QuantMethod::mxfp4) return mxfp4_scheme(hw);
  if (method == QuantMethod::nvfp4) return nvfp4_scheme(hw);
  QuantScheme q;
  q.method = method;
  switch (method) {
    case QuantMethod::none: break;
    case QuantMethod::fp8:
      // Per-channel fp32 weight scales (per-tensor checkpoints are a special
      // case of the same size to within a rounding).
      q.weight_bits = 8;
      q.scale_bytes = 4;
      q.weight_only = !fp8_tensor_cores;
      q.gemm_dtype = Dtype::fp8;
      q.kernel = fp8_tensor_cores ? "w8a8_fp8" : "w8a16_fp8_marlin";
      break;
    case QuantMethod::awq:
    case QuantMethod::gptq:
      q.weight_bits = 4;
      q.group_size = 128;
      q.scale_bytes = 2;
      q.zero_bits = 4;
      q.kernel = "w4a16_marlin";
      break;
    case QuantMethod::int8_w8a8:
      if (!int8_tensor_cores) {
        throw UsageError("quantization int8_w8a8 needs int8 tensor cores, which this hardware profile has not "
                         "(peak_tflops.int8); use fp8, awq or gptq");
      }
      q.weight_bits = 8;
      q.scale_bytes = 4;
      q.weight_only = false;
      q.gemm_dtype = Dtype::int8;
      q.kernel = "w8a8_int8";
      break;
    case QuantMethod::int8:
      q.weight_bits = 8;
      q.scale_bytes = 4;
      q.kernel = "w8a16_int8";
      break;
    case QuantMethod::mxfp4:
    case QuantMethod::nvfp4: break;  // above
  }
  return q;
}

double WeightPrecision::linear_bytes(std::int64_t n, std::int64_t k) const {
  const double dn = static_cast<double>(n), dk = static_cast<double>(k);
  if (!quantized()) return dn * dk * dense_bytes();
  const double groups_per_channel =
      quant.group_size > 0 ? static_cast<double>((k + quant.group_size - 1) / quant.group_size) : 1.0;
  const double per_group = static_cast<double>(quant.scale_bytes) + quant.zero_bits / 8.0;
  return dn * dk * quant.weight_bits / 8.0 + dn * groups_per_channel * per_group + quant.tensor_scale_bytes;
}

double WeightPrecision::linear_input_bytes() const {
  return quantized() && !quant.weight_only ? quant.input_bytes : activation();
}

}  // namespace twin
