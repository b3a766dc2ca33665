#pragma once
// Quantised weights, as vLLM's --quantization names them, and the one
// description of a replica's precision every size and price is taken from:
// the model's 16-bit dtype for activations and the layers that stay
// unquantised (embedding, LM head, norms, MoE router, as in vLLM), and the
// format of the linear layers' weights (docs/quantization.md).
#include <cstdint>
#include <string>
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
// mxfp4 (OCP microscaling: e2m1 weights, an e8m0 scale per 32 along k; GPT-OSS's
// experts): vLLM quantises the MoE experts only (Mxfp4Config leaves linear
// layers unquantized) and runs them with 16-bit activations on every GPU it
// supports: FlashInfer's MXFP4 x BF16 on Blackwell, Marlin or Triton on
// Ampere/Hopper, Triton on ROCm. nvfp4 (vLLM's modelopt_fp4: e2m1 weights,
// an fp8 e4m3 scale per 16 along k, fp32 per-tensor weight and input
// scales): every linear layer; W4A4 on FP4 tensor cores (CUTLASS), else
// weight-only FP4 Marlin (CUDA, compute capability 8.0 and newer).
enum class QuantMethod { none, fp8, awq, gptq, int8_w8a8, int8, mxfp4, nvfp4 };

std::string_view quant_method_name(QuantMethod m);  // "none", "fp8", ...
// vLLM's spellings; "" and "none" are none. UsageError listing the choices.
// modelopt_fp4 (vLLM's name) is nvfp4.
QuantMethod parse_quant_method(std::string_view text);

// A checkpoint's config.json quantization_config, as vLLM reads it: its
// quant_method ("fp8", "awq", "gptq", "mxfp4", "modelopt" with quant_algo
// "FP8" or "NVFP4"/"FP4") as our method name. UsageError naming the value
// for a method we do not price.
std::string checkpoint_quant_method(std::string_view quant_method, std::string_view quant_algo);

// The kernel a GPU runs a quantised linear layer with.
struct QuantScheme {
  QuantMethod method = QuantMethod::none;
  int weight_bits = 0;          // 8 or 4; 0: unquantised (the model's dtype)
  int group_size = 0;           // weights per scale along k; 0: one scale per output channel
  int scale_bytes = 0;          // per group (or output channel)
  int zero_bits = 0;            // zero point per group (awq, gptq: 4)
  bool weight_only = true;      // W*A16: weights dequantised to 16 bits inside the GEMM
  Dtype gemm_dtype = Dtype::bf16;  // W8A8 / W4A4: the tensor-core format (fp8, int8, fp4); else unused
  std::string_view kernel = "dense";  // a name for summaries and --explain-ops
  // --- issue 41 (hw helper): FP4 formats ---
  int tensor_scale_bytes = 0;   // per weight matrix (nvfp4: fp32 weight_scale_2 and input_scale)
  double input_bytes = 1.0;     // per activation element a W8A8 / W4A4 GEMM reads (nvfp4: 0.5 + 1/16)
  bool experts_only = false;    // mxfp4: only the MoE experts are quantised (vLLM's Mxfp4Config)
};

// The device facts a quantization method's kernel choice depends on
// (hwprofiles' quant_hardware builds it from a profile).
struct QuantHardware {
  std::string name;             // the profile's, for messages
  bool gpu = true;
  bool cuda = true;             // NVIDIA (CUDA) or AMD (ROCm)
  bool fp8 = false, int8 = false, fp4 = false;  // tensor-core formats
};

// What vLLM would run `method` with on a GPU with (or without) fp8 and int8
// tensor cores. UsageError for int8_w8a8 without int8 tensor cores.
QuantScheme quant_scheme(QuantMethod method, bool fp8_tensor_cores, bool int8_tensor_cores);
// The same on a described device; UsageError naming the method and the
// device where vLLM has no kernel for it there (nvfp4 on ROCm, an fp4
// format on a CPU).
QuantScheme quant_scheme(QuantMethod method, const QuantHardware& hw);

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
  // The precision of one linear layer: an expert's (`expert`) or any
  // other's (attention, dense MLP, shared experts), which an experts-only
  // format (mxfp4) leaves in the model's dtype.
  WeightPrecision for_linear(bool expert) const {
    return quant.experts_only && !expert ? WeightPrecision(dtype) : *this;
  }
  // Bytes of one n x k linear weight (n output channels, k inputs), with its
  // scales and zero points (and per-tensor scales).
  double linear_bytes(std::int64_t n, std::int64_t k) const;
  // Bytes of one activation element a linear GEMM reads: 1 under W8A8
  // (quantised per token as the previous kernel writes it), 0.5625 under
  // NVFP4 W4A4 (4 bits and an fp8 scale per 16), else 16 bits.
  double linear_input_bytes() const;
  // Bytes of one unquantised weight element and of one activation element.
  double dense_bytes() const { return static_cast<double>(dtype_bytes(dtype)); }
  double activation() const { return static_cast<double>(activation_bytes(dtype)); }
};

}  // namespace twin
