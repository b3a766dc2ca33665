#pragma once
// Element types a backend stores, and the host-side conversions between them.
// Compute is fp32 on the CPU; bf16/fp16 are storage formats (weights, and on a
// GPU also activations and KV). The conversions are plain bit arithmetic so a
// device backend can reuse the same rounding (round to nearest even).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace twin {

// i8: int8 weights of a weight-only quantised GEMM, read with per-output-
// channel f32 scales (GemmOptions::w_scales); never converted on its own.
// f8e4m3: OCP FP8 E4M3 ("fn": no infinities, 0x7f/0xff NaN, largest finite
// 448), the KV cache's 8-bit format (--kv-cache-dtype fp8_e4m3), stored as
// value / scale with a per-tensor scale (KvCacheView::k_scale, v_scale).
// The CUDA backend's dtype codes are these values: append, never reorder.
enum class ElemType : std::uint8_t { f32, bf16, f16, i32, i8, f8e4m3 };

constexpr std::size_t elem_bytes(ElemType d) {
  switch (d) {
    case ElemType::f32: return 4;
    case ElemType::bf16: return 2;
    case ElemType::f16: return 2;
    case ElemType::i32: return 4;
    case ElemType::i8: return 1;
    case ElemType::f8e4m3: return 1;
  }
  return 0;
}

constexpr std::string_view elem_type_name(ElemType d) {
  switch (d) {
    case ElemType::f32: return "f32";
    case ElemType::bf16: return "bf16";
    case ElemType::f16: return "f16";
    case ElemType::i32: return "i32";
    case ElemType::i8: return "i8";
    case ElemType::f8e4m3: return "fp8_e4m3";
  }
  return "?";
}

// Parses "f32"/"float32", "bf16"/"bfloat16", "f16"/"float16", "i32"/"int32",
// "fp8_e4m3"/"fp8";
// throws UsageError listing the known names otherwise (defined in dtype.cpp).
ElemType parse_elem_type(std::string_view name);

constexpr float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

constexpr std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

// FP8 E4M3 to and from f32. To FP8: round to nearest even, saturating at
// +-448 (as CUDA's __NV_SATFINITE conversion), NaN to NaN; values below half
// the smallest subnormal (2^-10) to a signed zero.
constexpr float fp8e4m3_to_f32(std::uint8_t b) {
  const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x80u) << 24;
  const std::uint32_t exp = (b >> 3) & 0xfu, mant = b & 0x7u;
  if (exp == 0xfu && mant == 0x7u) return std::bit_cast<float>(sign | 0x7fc00000u);
  if (exp == 0) {  // subnormal: mant x 2^-9, exact in f32
    const float v = static_cast<float>(mant) * (1.0f / 512.0f);
    return sign != 0 ? -v : v;
  }
  return std::bit_cast<float>(sign | (exp + (127 - 7)) << 23 | mant << 20);
}

constexpr std::uint8_t f32_to_fp8e4m3(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7fu;   // NaN
  if (abs >= 0x43e00000u) return sign | 0x7eu;  // >= 448 (and inf): saturate
  const std::uint32_t exp = abs >> 23;
  if (exp < 121) {  // below 2^-6: a subnormal of 2^-9 steps, or zero
    if (exp < 117) return sign;  // below 2^-10 (2^-10 itself ties to the even 0)
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 141 - exp;  // 21..24: mant >> shift = value / 2^-9
    std::uint32_t q = mant >> shift;
    const std::uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return sign | static_cast<std::uint8_t>(q);  // q == 8 is the smallest normal
  }
  std::uint32_t v = abs - (120u << 23);  // rebias 127 -> 7
  v += 0x7ffffu + ((v >> 20) & 1u);      // round to nearest even; a carry moves to the exponent
  return sign | static_cast<std::uint8_t>(v >> 20);
}

float f16_to_f32(std::uint16_t h);
std::uint16_t f32_to_f16(float f);

// Converts n elements of `src` (any float dtype) to fp32 / from fp32.
void convert_to_f32(const void* src, ElemType src_dtype, float* dst, std::size_t n);
void convert_from_f32(const float* src, void* dst, ElemType dst_dtype, std::size_t n);

}  // namespace twin
