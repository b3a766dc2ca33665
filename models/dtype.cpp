#include "models/dtype.hpp"

#include <string>

#include "engine/core/error.hpp"

namespace twin {

std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::fp16: return "fp16";
    case Dtype::bf16: return "bf16";
    case Dtype::fp8: return "fp8";
    case Dtype::int8: return "int8";
  }
  return "unknown";
}

Dtype parse_dtype(std::string_view text) {
  for (Dtype d : kAllDtypes)
    if (text == dtype_name(d)) return d;
  if (text == "float32") return Dtype::fp32;
  if (text == "float16") return Dtype::fp16;
  if (text == "bfloat16") return Dtype::bf16;
  throw UsageError("unknown dtype '" + excerpt(text) +
                   "'; expected one of: fp32, fp16, bf16, fp8, int8 (or float32, float16, bfloat16)");
}

}  // namespace twin
