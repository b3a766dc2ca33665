#pragma once
// Device helpers shared by the .cu files: element loads and stores by dtype
// code (bf16 rounding bit-identical to twin::f32_to_bf16), block reductions
// and the launch geometry of element-wise kernels.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/cuda_kernels.hpp"

namespace twin::cuda {

// FP8 E4M3 through CUDA's own conversions: round to nearest even,
// saturating at +-448 (__NV_SATFINITE), as twin::f32_to_fp8e4m3 on the host.
__device__ __forceinline__ float fp8_to_f32(std::uint8_t b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3)));
}

__device__ __forceinline__ std::uint8_t f32_to_fp8(float f) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
}

// An element as stored (an fp8 KV element unscaled: the kernels apply the scale).
__device__ __forceinline__ float load_elem(const void* p, int dtype, std::int64_t i) {
  if (dtype == kBf16) return __uint_as_float(static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(p)[i]) << 16);
  if (dtype == kF16) return __half2float(static_cast<const __half*>(p)[i]);
  if (dtype == kF8E4M3) return fp8_to_f32(static_cast<const std::uint8_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__device__ __forceinline__ std::uint16_t f32_to_bf16_bits(float f) {
  std::uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

__device__ __forceinline__ void store_elem(void* p, int dtype, std::int64_t i, float v) {
  if (dtype == kBf16) {
    static_cast<std::uint16_t*>(p)[i] = f32_to_bf16_bits(v);
  } else if (dtype == kF16) {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  } else if (dtype == kF8E4M3) {
    static_cast<std::uint8_t*>(p)[i] = f32_to_fp8(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / max over the block; every thread gets the result. blockDim.x must be
// a multiple of 32; `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > (1 << 20) ? (1 << 20) : blocks));
}

#define TWIN_GRID_STRIDE(i, n) \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

}  // namespace twin::cuda
