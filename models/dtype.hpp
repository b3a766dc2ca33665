#pragma once
// Element types of weights, activations and the KV cache.
#include <cstdint>
#include <string_view>

namespace twin {

enum class Dtype { fp32, fp16, bf16, fp8, int8 };

inline constexpr Dtype kAllDtypes[] = {Dtype::fp32, Dtype::fp16, Dtype::bf16, Dtype::fp8,
                                       Dtype::int8};

constexpr int64_t dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::fp32: return 4;
    case Dtype::fp16:
    case Dtype::bf16: return 2;
    case Dtype::fp8:
    case Dtype::int8: return 1;
  }
  return 0;
}

// Activations stay in 16 bits when weights are quantised (fp8/int8 weights
// are dequantised into bf16 GEMMs or use bf16 outputs), and in fp32 for fp32.
constexpr int64_t activation_bytes(Dtype weights) { return weights == Dtype::fp32 ? 4 : 2; }

// "fp32", "fp16", ... (static storage).
std::string_view dtype_name(Dtype d);

// Accepts our names and the Hugging Face torch_dtype spellings ("float16",
// "bfloat16", "float32"). Throws UsageError listing the choices.
Dtype parse_dtype(std::string_view text);

}  // namespace twin
