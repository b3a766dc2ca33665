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
  std::string known;
  for (const Name& n : kNames) known += (known.empty() ? "" : ", ") + std::string(n.text);
  throw UsageError("unknown quantization '" + excerpt(text, 40) + "'; expected one of: " + known +
                   " (awq_marlin and gptq_marlin are read as awq and gptq)");
}

QuantScheme quant_scheme(QuantMethod method, bool fp8_tensor_cores, bool int8_tensor_cores) {
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
  }
  return q;
}

double WeightPrecision::linear_bytes(std::int64_t n, std::int64_t k) const {
  const double dn = static_cast<double>(n), dk = static_cast<double>(k);
  if (!quantized()) return dn * dk * dense_bytes();
  const double groups_per_channel =
      quant.group_size > 0 ? static_cast<double>((k + quant.group_size - 1) / quant.group_size) : 1.0;
  const double per_group = static_cast<double>(quant.scale_bytes) + quant.zero_bits / 8.0;
  return dn * dk * quant.weight_bits / 8.0 + dn * groups_per_channel * per_group;
}

double WeightPrecision::linear_input_bytes() const {
  return quantized() && !quant.weight_only ? 1.0 : activation();
}

}  // namespace twin
