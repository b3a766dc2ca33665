#include "engine/backend/dtype.hpp"

#include <cstring>
#include <string>

#include "base/error.hpp"

namespace twin {

ElemType parse_elem_type(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "fp32") return ElemType::f32;
  if (name == "bf16" || name == "bfloat16") return ElemType::bf16;
  if (name == "f16" || name == "float16" || name == "fp16") return ElemType::f16;
  if (name == "i32" || name == "int32") return ElemType::i32;
  if (name == "fp8_e4m3" || name == "fp8" || name == "f8e4m3") return ElemType::f8e4m3;
  throw UsageError("unknown dtype '" + excerpt(name) + "' (known: f32, bf16, f16, i32, fp8_e4m3)");
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + (127 - 15)) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

std::uint16_t f32_to_f16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow (incl. inf) after rounding
  if (abs < 0x38800000u) {                        // result is subnormal or zero
    if (abs < 0x33000000u) return sign;           // below half the smallest subnormal
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exp;  // 14..24 + 1
    std::uint32_t half = mant >> shift;
    const std::uint32_t rest = mant & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return sign | static_cast<std::uint16_t>(half);
  }
  std::uint32_t v = abs - (112u << 23);  // rebias 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);        // round to nearest even
  return sign | static_cast<std::uint16_t>(v >> 13);
}

void convert_to_f32(const void* src, ElemType src_dtype, float* dst, std::size_t n) {
  switch (src_dtype) {
    case ElemType::f32: std::memcpy(dst, src, n * sizeof(float)); return;
    case ElemType::bf16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case ElemType::f16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case ElemType::f8e4m3: {  // unscaled: the KV cache's reader applies its scale
      const auto* s = static_cast<const std::uint8_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = fp8e4m3_to_f32(s[i]);
      return;
    }
    case ElemType::i32:
    case ElemType::i8: break;  // i8 needs its scales: the GEMM dequantises
  }
  throw Error("convert_to_f32: unsupported source dtype " + std::string(elem_type_name(src_dtype)));
}

void convert_from_f32(const float* src, void* dst, ElemType dst_dtype, std::size_t n) {
  switch (dst_dtype) {
    case ElemType::f32: std::memcpy(dst, src, n * sizeof(float)); return;
    case ElemType::bf16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case ElemType::f16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case ElemType::f8e4m3: {  // unscaled: the KV cache's writer divides by its scale first
      auto* d = static_cast<std::uint8_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_fp8e4m3(src[i]);
      return;
    }
    case ElemType::i32:
    case ElemType::i8: break;  // quantising needs scales: see the runtime's weights
  }
  throw Error("convert_from_f32: unsupported destination dtype " + std::string(elem_type_name(dst_dtype)));
}

}  // namespace twin
