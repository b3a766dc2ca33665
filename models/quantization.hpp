#pragma once
// Quantised weights, as vLLM's --quantization names them, and the one
// description of a replica's precision every size and price is taken from:
// the model's 16-bit dtype for activations and the layers that stay
// unquantised (embedding, LM head, norms, MoE router, as in vLLM), and the
// format of the linear layers' weights (docs/quantization.md).
#include <cstdint>
#include <string_view>

#include "models/dtype.hpp"

namespace twin {

// fp8: W8A8 fp8 (per-tensor or per-channel weight scales, dynamic per-token
// activation scales) where the GPU has fp8 tensor cores, else weight-only
// fp8 (W8A16, a Marlin-like kernel, as vLLM does on A100). awq, gptq: 4-bit
// weight-only (W4A16) in groups of 128 along k, a 16-bit scale and a 4-bit
// zero point per group. int8_w8a8: SmoothQuant-style W8A8 int8 (per-channel
// weight scales). int8: 8-bit weight-only (W8A16) with per-channel scales,
// what the CPU engine runs.
enum class QuantMethod { none, fp8, awq, gptq, int8_w8a8, int8 };

std::string_view quant_method_name(QuantMethod m);  // "none", "fp8", ...
// vLLM's spellings; "" and "none" are none. UsageError listing the choices.
QuantMethod parse_quant_method(std::string_view text);

// The kernel a GPU runs a quantised linear layer with.
struct QuantScheme {
  QuantMethod method = QuantMethod::none;
  int weight_bits = 0;          // 8 or 4; 0: unquantised (the model's dtype)
  int group_size = 0;           // weights per scale along k; 0: one scale per output channel
  int scale_bytes = 0;          // per group (or output channel)
  int zero_bits = 0;            // zero point per group (awq, gptq: 4)
  bool weight_only = true;      // W*A16: weights dequantised to 16 bits inside the GEMM
  Dtype gemm_dtype = Dtype::bf16;  // W8A8: the tensor-core format (fp8, int8); else unused
  std::string_view kernel = "dense";  // a name for summaries and --explain-ops
};

// What vLLM would run `method` with on a GPU with (or without) fp8 and int8
// tensor cores. UsageError for int8_w8a8 without int8 tensor cores.
QuantScheme quant_scheme(QuantMethod method, bool fp8_tensor_cores, bool int8_tensor_cores);

// The precision of a replica's weights and activations. Implicit from a
// Dtype: unquantised, every weight and activation in that dtype (the shape
// every caller before quantization used).
struct WeightPrecision {
  Dtype dtype = Dtype::bf16;  // activations and the unquantised weights
  QuantScheme quant;          // the linear layers' weights; method none: dtype

  WeightPrecision() = default;
  WeightPrecision(Dtype d) : dtype(d) {}  // implicit on purpose: a Dtype is unquantised precision
  WeightPrecision(Dtype d, QuantScheme q) : dtype(d), quant(q) {}

  bool quantized() const { return quant.method != QuantMethod::none; }
  // Bytes of one n x k linear weight (n output channels, k inputs), with its
  // scales and zero points.
  double linear_bytes(std::int64_t n, std::int64_t k) const;
  // Bytes of one activation element a linear GEMM reads: 1 under W8A8
  // (quantised per token as the previous kernel writes it), else 16 bits.
  double linear_input_bytes() const;
  // Bytes of one unquantised weight element and of one activation element.
  double dense_bytes() const { return static_cast<double>(dtype_bytes(dtype)); }
  double activation() const { return static_cast<double>(activation_bytes(dtype)); }
};

}  // namespace twin
