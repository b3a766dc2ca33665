#pragma once
// Element types of weights, activations and the KV cache.
#include <cstdint>
#include <optional>
#include <string_view>

namespace twin {

// fp4 (OCP e2m1) is a compute format only: the tensor-core format of a W4A4
// GEMM (QuantScheme::gemm_dtype), priced at peak_tflops.fp4. It is no
// storage dtype (vLLM has no fp4 KV cache or fp4 activations between
// layers): parse_dtype refuses it by name, kAllDtypes (the storage dtypes)
// leaves it out, and dtype_bytes has no whole-byte size for it (0): fp4
// weights are sized in bits by WeightPrecision::linear_bytes.
enum class Dtype { fp32, fp16, bf16, fp8, int8, fp4 };

inline constexpr Dtype kAllDtypes[] = {Dtype::fp32, Dtype::fp16, Dtype::bf16, Dtype::fp8,
                                       Dtype::int8};

constexpr int64_t dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::fp32: return 4;
    case Dtype::fp16:
    case Dtype::bf16: return 2;
    case Dtype::fp8:
    case Dtype::int8: return 1;
    case Dtype::fp4: return 0;  // sub-byte: see the enum
  }
  return 0;
}

// Activations stay in 16 bits when weights are quantised (fp8/int8 weights
// are dequantised into bf16 GEMMs or use bf16 outputs), and in fp32 for fp32.
constexpr int64_t activation_bytes(Dtype weights) { return weights == Dtype::fp32 ? 4 : 2; }

// "fp32", "fp16", ... (static storage).
std::string_view dtype_name(Dtype d);

// The one dtype vocabulary of every --dtype and --kv-cache-dtype flag,
// config key, model config and profile field: our names and vLLM's and
// PyTorch's spellings. fp32 = f32, float32, float; fp16 = f16, float16, half;
// bf16 = bfloat16; fp8 = fp8_e4m3, fp8_e5m2 (priced alike); int8. Throws
// UsageError listing the choices (not "auto": see parse_dtype_or_auto).
Dtype parse_dtype(std::string_view text);

// vLLM's default "auto" (the model's own dtype for the weights, the weights'
// for the KV cache) is nullopt; anything else is parse_dtype's.
std::optional<Dtype> parse_dtype_or_auto(std::string_view text);

}  // namespace twin
