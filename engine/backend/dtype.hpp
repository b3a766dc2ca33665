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
enum class ElemType : std::uint8_t { f32, bf16, f16, i32, i8 };

constexpr std::size_t elem_bytes(ElemType d) {
  switch (d) {
    case ElemType::f32: return 4;
    case ElemType::bf16: return 2;
    case ElemType::f16: return 2;
    case ElemType::i32: return 4;
    case ElemType::i8: return 1;
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
  }
  return "?";
}

// Parses "f32"/"float32", "bf16"/"bfloat16", "f16"/"float16", "i32"/"int32";
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

float f16_to_f32(std::uint16_t h);
std::uint16_t f32_to_f16(float f);

// Converts n elements of `src` (any float dtype) to fp32 / from fp32.
void convert_to_f32(const void* src, ElemType src_dtype, float* dst, std::size_t n);
void convert_from_f32(const float* src, void* dst, ElemType dst_dtype, std::size_t n);

}  // namespace twin
