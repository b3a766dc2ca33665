#include "models/dtype.hpp"

#include <string>

#include "base/error.hpp"

namespace twin {

std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::fp16: return "fp16";
    case Dtype::bf16: return "bf16";
    case Dtype::fp8: return "fp8";
    case Dtype::int8: return "int8";
    case Dtype::fp4: return "fp4";
  }
  return "unknown";
}

namespace {

struct Spelling {
  std::string_view text;
  Dtype dtype;
};
constexpr Spelling kSpellings[] = {
    {"fp32", Dtype::fp32},     {"f32", Dtype::fp32},      {"float32", Dtype::fp32}, {"float", Dtype::fp32},
    {"fp16", Dtype::fp16},     {"f16", Dtype::fp16},      {"float16", Dtype::fp16}, {"half", Dtype::fp16},
    {"bf16", Dtype::bf16},     {"bfloat16", Dtype::bf16}, {"fp8", Dtype::fp8},      {"fp8_e4m3", Dtype::fp8},
    {"fp8_e5m2", Dtype::fp8},  {"int8", Dtype::int8},
};

}  // namespace

Dtype parse_dtype(std::string_view text) {
  for (const Spelling& s : kSpellings)
    if (text == s.text) return s.dtype;
  std::string known;
  for (const Spelling& s : kSpellings) known += (known.empty() ? "" : ", ") + std::string(s.text);
  // 4-bit floats are a weight format, not an element type of activations or
  // of the KV cache (vLLM's --kv-cache-dtype has no fp4 choice either).
  for (std::string_view fp4 : {"fp4", "fp4_e2m1", "e2m1", "mxfp4", "nvfp4"})
    if (text == fp4) {
      throw UsageError("dtype '" + std::string(text) +
                       "' is not supported: 4-bit floats are a weight format only (--quantization mxfp4 or "
                       "nvfp4); activations and the KV cache have no fp4 storage; expected one of: " + known);
    }
  throw UsageError("unknown dtype '" + excerpt(text, 40) + "'; expected one of: " + known);
}

std::optional<Dtype> parse_dtype_or_auto(std::string_view text) {
  if (text == "auto") return std::nullopt;
  return parse_dtype(text);
}

}  // namespace twin
