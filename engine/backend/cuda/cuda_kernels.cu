// The CUDA backend's element-wise, normalisation, rotary, KV-write and MoE
// kernels. Deliberately simple: grid-stride loops over elements, one block
// per row for reductions, runtime dtype codes instead of templates (one
// instantiation each keeps the build short). Launchers: cuda_kernels.hpp.
#include "engine/backend/cuda/argmax_rule.hpp"
#include "engine/backend/cuda/cuda_device_util.cuh"

namespace twin::cuda {

namespace {

__global__ void convert_2d_kernel(const void* src, int sd, std::int64_t ss, void* dst, int dd, std::int64_t ds,
                                  std::int64_t rows, std::int64_t cols) {
  TWIN_GRID_STRIDE(i, rows * cols) {
    const std::int64_t r = i / cols, c = i % cols;
    store_elem(dst, dd, r * ds + c, load_elem(src, sd, r * ss + c));
  }
}

__global__ void fill_2d_kernel(float* dst, std::int64_t stride, std::int64_t rows, std::int64_t cols, float value) {
  TWIN_GRID_STRIDE(i, rows * cols) { dst[(i / cols) * stride + i % cols] = value; }
}

__global__ void add_bias_kernel(float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols, const void* bias,
                                int bd) {
  TWIN_GRID_STRIDE(i, rows * cols) {
    const std::int64_t col = i % cols;
    c[(i / cols) * ldc + col] += load_elem(bias, bd, col);
  }
}

__global__ void embedding_kernel(const std::int32_t* ids, std::int64_t n, const void* table, int td,
                                 std::int64_t ts, float* out, std::int64_t os, std::int64_t cols) {
  TWIN_GRID_STRIDE(i, n * cols) {
    const std::int64_t r = i / cols, c = i % cols;
    out[r * os + c] = load_elem(table, td, static_cast<std::int64_t>(ids[r]) * ts + c);
  }
}

__global__ void gather_rows_kernel(const float* src, std::int64_t ss, const std::int32_t* rows, std::int64_t n,
                                   float* dst, std::int64_t ds, std::int64_t cols) {
  TWIN_GRID_STRIDE(i, n * cols) {
    const std::int64_t r = i / cols, c = i % cols;
    dst[r * ds + c] = src[static_cast<std::int64_t>(rows[r]) * ss + c];
  }
}

__global__ void scatter_rows_kernel(const float* src, std::int64_t ss, const std::int32_t* rows, std::int64_t n,
                                    float* dst, std::int64_t ds, std::int64_t cols) {
  TWIN_GRID_STRIDE(i, n * cols) {
    const std::int64_t r = i / cols, c = i % cols;
    dst[static_cast<std::int64_t>(rows[r]) * ds + c] = src[r * ss + c];
  }
}

__global__ void add_kernel(float* x, std::int64_t xs, const float* y, std::int64_t ys, std::int64_t rows,
                           std::int64_t cols) {
  TWIN_GRID_STRIDE(i, rows * cols) {
    const std::int64_t r = i / cols, c = i % cols;
    x[r * xs + c] += y[r * ys + c];
  }
}

// One block per row. Each thread revisits only the columns it wrote, so the
// in-place residual update needs no extra barrier.
__global__ void add_rmsnorm_kernel(float* x, std::int64_t xs, const float* delta, std::int64_t dls, const void* w,
                                   int wd, float eps, float* out, std::int64_t os, std::int64_t cols) {
  __shared__ float scratch[32];
  const std::int64_t r = blockIdx.x;
  float* xr = x + r * xs;
  float ss = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = xr[c];
    if (delta != nullptr) {
      v += delta[r * dls + c];
      xr[c] = v;
    }
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[r * os + c] = xr[c] * inv * load_elem(w, wd, c);
}

// The aligned case (cols % 4 == 0, rows and weight 16-byte aligned, cols
// up to 8192): a thread keeps its 8 or fewer float4s of the row in
// registers, so x and delta are read once with 16-byte loads (all issued
// before any use), the residual written once, and the output computed from
// registers after the block's sum of squares. Same expression as the CPU:
// (x * inv) * w with inv = 1 / sqrt(mean + eps).
constexpr int kNormThreads = 256;
constexpr int kNormVec = 8;  // float4s a thread keeps: rows up to 256 * 8 * 4 = 8192 wide

__device__ __forceinline__ float4 load_weight4(const void* w, int wd, int c4) {
  if (wd == kF32) return static_cast<const float4*>(w)[c4];
  const uint2 b = static_cast<const uint2*>(w)[c4];  // 4 x 16 bits, lower element in the low half
  if (wd == kBf16) {
    return make_float4(__uint_as_float(b.x << 16), __uint_as_float(b.x & 0xffff0000u), __uint_as_float(b.y << 16),
                       __uint_as_float(b.y & 0xffff0000u));
  }
  return make_float4(__half2float(__ushort_as_half(static_cast<unsigned short>(b.x & 0xffffu))),
                     __half2float(__ushort_as_half(static_cast<unsigned short>(b.x >> 16))),
                     __half2float(__ushort_as_half(static_cast<unsigned short>(b.y & 0xffffu))),
                     __half2float(__ushort_as_half(static_cast<unsigned short>(b.y >> 16))));
}

__global__ void __launch_bounds__(kNormThreads) add_rmsnorm_vec_kernel(float* x, std::int64_t xs, const float* delta,
                                                                       std::int64_t dls, const void* w, int wd, float eps,
                                                                       float* out, std::int64_t os, int cols) {
  __shared__ float scratch[32];
  const std::int64_t r = blockIdx.x;
  const int n4 = cols / 4;
  float4* xr = reinterpret_cast<float4*>(x + r * xs);
  float4 v[kNormVec], d[kNormVec];
#pragma unroll
  for (int k = 0; k < kNormVec; ++k) {
    const int c = static_cast<int>(threadIdx.x) + k * kNormThreads;
    if (c < n4) v[k] = xr[c];
  }
  if (delta != nullptr) {
    const float4* dr = reinterpret_cast<const float4*>(delta + r * dls);
#pragma unroll
    for (int k = 0; k < kNormVec; ++k) {
      const int c = static_cast<int>(threadIdx.x) + k * kNormThreads;
      if (c < n4) d[k] = dr[c];
    }
#pragma unroll
    for (int k = 0; k < kNormVec; ++k) {
      const int c = static_cast<int>(threadIdx.x) + k * kNormThreads;
      if (c < n4) {
        v[k] = make_float4(v[k].x + d[k].x, v[k].y + d[k].y, v[k].z + d[k].z, v[k].w + d[k].w);
        xr[c] = v[k];
      }
    }
  }
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kNormVec; ++k) {
    const int c = static_cast<int>(threadIdx.x) + k * kNormThreads;
    if (c < n4) ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
  float4* orow = reinterpret_cast<float4*>(out + r * os);
#pragma unroll
  for (int k = 0; k < kNormVec; ++k) {
    const int c = static_cast<int>(threadIdx.x) + k * kNormThreads;
    if (c < n4) {
      const float4 g = load_weight4(w, wd, c);
      orow[c] = make_float4(v[k].x * inv * g.x, v[k].y * inv * g.y, v[k].z * inv * g.z, v[k].w * inv * g.w);
    }
  }
}

// One thread per (token, head, rotated pair). Angles in double from the
// host's frequencies, as on the CPU.
__global__ void rotary_kernel(float* q, std::int64_t qs, std::int64_t qh, float* k, std::int64_t ks,
                              std::int64_t kh, const std::int32_t* positions, std::int64_t tokens, int hd, int rot,
                              const double* inv_freqs) {
  const int half = rot / 2;
  const std::int64_t heads = qh + kh;
  TWIN_GRID_STRIDE(idx, tokens * heads * half) {
    const std::int64_t t = idx / (heads * half);
    const std::int64_t h = (idx / half) % heads;
    const int i = static_cast<int>(idx % half);
    const double angle = static_cast<double>(positions[t]) * inv_freqs[i];
    const float cs = static_cast<float>(cos(angle)), sn = static_cast<float>(sin(angle));
    float* xv = h < qh ? q + t * qs + h * hd : k + t * ks + (h - qh) * hd;
    const float a = xv[i], b = xv[i + half];
    xv[i] = a * cs - b * sn;
    xv[i + half] = b * cs + a * sn;
  }
}

__global__ void silu_and_mul_kernel(const float* gu, std::int64_t gs, float* out, std::int64_t os, std::int64_t rows,
                                    std::int64_t cols) {
  TWIN_GRID_STRIDE(i, rows * cols) {
    const std::int64_t r = i / cols, c = i % cols;
    const float g = gu[r * gs + c], u = gu[r * gs + cols + c];
    out[r * os + c] = g / (1.0f + expf(-g)) * u;
  }
}

__global__ void kv_write_kernel(const float* k, std::int64_t ks, const float* v, std::int64_t vs,
                                const std::int64_t* slots, std::int64_t tokens, void* kc, void* vc, int cd,
                                std::int64_t width, float k_inv, float v_inv) {
  TWIN_GRID_STRIDE(i, tokens * width) {
    const std::int64_t t = i / width, e = i % width;
    const std::int64_t slot = slots[t];
    if (slot < 0) continue;
    store_elem(kc, cd, slot * width + e, k[t * ks + e] * k_inv);
    store_elem(vc, cd, slot * width + e, v[t * vs + e] * v_inv);
  }
}

// Aligned rows (cols, strides % 4 == 0, pointers 16-byte aligned): 4
// columns a thread, 16-byte loads and stores, the same expression.
__global__ void silu_and_mul_vec_kernel(const float* gu, std::int64_t gs, float* out, std::int64_t os,
                                        std::int64_t rows, std::int64_t cols) {
  const std::int64_t c4s = cols / 4;
  TWIN_GRID_STRIDE(i, rows * c4s) {
    const std::int64_t r = i / c4s, c = (i % c4s) * 4;
    const float4 g = *reinterpret_cast<const float4*>(gu + r * gs + c);
    const float4 u = *reinterpret_cast<const float4*>(gu + r * gs + cols + c);
    float4 o;
    o.x = g.x / (1.0f + expf(-g.x)) * u.x;
    o.y = g.y / (1.0f + expf(-g.y)) * u.y;
    o.z = g.z / (1.0f + expf(-g.z)) * u.z;
    o.w = g.w / (1.0f + expf(-g.w)) * u.w;
    *reinterpret_cast<float4*>(out + r * os + c) = o;
  }
}

// 4 elements of f32 into the cache: one 16-byte store (f32) or one 8-byte
// store of 4 x 16 bits (bf16 / f16), rounded as store_elem rounds.
__device__ __forceinline__ void store4(void* cache, int cd, std::int64_t i, float4 v) {
  if (cd == kF32) {
    *reinterpret_cast<float4*>(static_cast<float*>(cache) + i) = v;
    return;
  }
  if (cd == kF8E4M3) {  // four bytes, one 4-byte store
    *reinterpret_cast<std::uint32_t*>(static_cast<std::uint8_t*>(cache) + i) =
        f32_to_fp8(v.x) | (static_cast<std::uint32_t>(f32_to_fp8(v.y)) << 8) |
        (static_cast<std::uint32_t>(f32_to_fp8(v.z)) << 16) | (static_cast<std::uint32_t>(f32_to_fp8(v.w)) << 24);
    return;
  }
  std::uint16_t b[4];
  const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    b[j] = cd == kBf16 ? f32_to_bf16_bits(f[j]) : __half_as_ushort(__float2half_rn(f[j]));
  }
  *reinterpret_cast<uint2*>(static_cast<std::uint16_t*>(cache) + i) =
      make_uint2(b[0] | (static_cast<std::uint32_t>(b[1]) << 16), b[2] | (static_cast<std::uint32_t>(b[3]) << 16));
}

__global__ void kv_write_vec_kernel(const float* k, std::int64_t ks, const float* v, std::int64_t vs,
                                    const std::int64_t* slots, std::int64_t tokens, void* kc, void* vc, int cd,
                                    std::int64_t width, float k_inv, float v_inv) {
  const std::int64_t w4 = width / 4;
  const auto scaled = [](float4 x, float s) { return make_float4(x.x * s, x.y * s, x.z * s, x.w * s); };
  TWIN_GRID_STRIDE(i, tokens * w4) {
    const std::int64_t t = i / w4, e = (i % w4) * 4;
    const std::int64_t slot = slots[t];
    if (slot < 0) continue;
    store4(kc, cd, slot * width + e, scaled(*reinterpret_cast<const float4*>(k + t * ks + e), k_inv));
    store4(vc, cd, slot * width + e, scaled(*reinterpret_cast<const float4*>(v + t * vs + e), v_inv));
  }
}

// One thread per token: experts are few (8 to 256) and top_k small; softmax
// and selection in the CPU's order (sequential sum, ties to the lower id).
__global__ void moe_topk_kernel(const float* logits, std::int64_t ls, std::int64_t tokens, int experts, int top_k,
                                bool renormalize, std::int32_t* ids, std::int64_t is, float* wts, std::int64_t ws) {
  TWIN_GRID_STRIDE(t, tokens) {
    const float* l = logits + t * ls;
    float mx = l[0];
    for (int e = 1; e < experts; ++e) mx = fmaxf(mx, l[e]);
    float total = 0.0f;
    for (int e = 0; e < experts; ++e) total += expf(l[e] - mx);
    std::int32_t* out_ids = ids + t * is;
    float* out_w = wts + t * ws;
    float kept = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      int best = -1;
      float best_p = 0.0f;
      for (int e = 0; e < experts; ++e) {
        bool taken = false;
        for (int x = 0; x < j; ++x) taken = taken || out_ids[x] == e;
        if (taken) continue;
        const float p = expf(l[e] - mx) / total;
        if (best < 0 || p > best_p) {
          best = e;
          best_p = p;
        }
      }
      out_ids[j] = best;
      out_w[j] = best_p;
      kept += best_p;
    }
    if (renormalize) {
      for (int j = 0; j < top_k; ++j) out_w[j] /= kept;
    }
  }
}

__global__ void moe_combine_kernel(const float* pair_out, const float* w, std::int64_t ws, int top_k, float* out,
                                   std::int64_t os, std::int64_t tokens, std::int64_t hidden) {
  TWIN_GRID_STRIDE(i, tokens * hidden) {
    const std::int64_t t = i / hidden, c = i % hidden;
    float o = 0.0f;
    for (int j = 0; j < top_k; ++j) o += w[t * ws + j] * pair_out[(t * top_k + j) * hidden + c];
    out[t * os + c] = o;
  }
}

// Greedy argmax in two stages (argmax_rule.hpp has the rule, tested on the
// CPU): blocks of 256 threads each reduce a chunk of 4096 logits of a row
// to (value, id) partials, so a batch-1 row of Llama 3's 128k vocabulary is
// spread over 32 blocks instead of one; then a warp per row merges the
// row's chunks. The rule keeps the larger value and the lower id on ties,
// never a NaN, so any order of merging gives the host scan's pick.
__device__ __forceinline__ argmax::Best warp_best(argmax::Best b) {
  for (int o = 16; o > 0; o >>= 1) {
    argmax::Best other;
    other.v = __shfl_xor_sync(0xffffffffu, b.v, o);
    other.i = __shfl_xor_sync(0xffffffffu, b.i, o);
    argmax::merge(b, other);
  }
  return b;
}

__global__ void __launch_bounds__(argmax::kThreads) argmax_chunks_kernel(const float* logits, std::int64_t stride,
                                                                         std::int64_t vocab, const std::int32_t* rows,
                                                                         bool vec, argmax::Best* partials) {
  __shared__ argmax::Best warp_bests[argmax::kThreads / 32];
  const std::int64_t chunk = blockIdx.y;  // rows in x: up to 2^31 - 1
  const float* x = logits + static_cast<std::int64_t>(rows[blockIdx.x]) * stride;
  argmax::Best b = argmax::none();
  const int t = static_cast<int>(threadIdx.x);
  if (vec) {  // vocab % 4 == 0 and the row 16-byte aligned: 4 float4 loads, all in flight
    float4 f[argmax::kPerThread / 4];
#pragma unroll
    for (int k = 0; k < argmax::kPerThread / 4; ++k) {
      const std::int64_t e = argmax::element(chunk, t, 4 * k, true);
      f[k] = e < vocab ? *reinterpret_cast<const float4*>(x + e) : make_float4(NAN, NAN, NAN, NAN);
    }
#pragma unroll
    for (int k = 0; k < argmax::kPerThread / 4; ++k) {
      const auto e = static_cast<std::int32_t>(argmax::element(chunk, t, 4 * k, true));
      argmax::take(b, f[k].x, e);
      argmax::take(b, f[k].y, e + 1);
      argmax::take(b, f[k].z, e + 2);
      argmax::take(b, f[k].w, e + 3);
    }
  } else {
    float f[argmax::kPerThread];
#pragma unroll
    for (int k = 0; k < argmax::kPerThread; ++k) {
      const std::int64_t e = argmax::element(chunk, t, k, false);
      f[k] = e < vocab ? x[e] : NAN;
    }
#pragma unroll
    for (int k = 0; k < argmax::kPerThread; ++k) {
      argmax::take(b, f[k], static_cast<std::int32_t>(argmax::element(chunk, t, k, false)));
    }
  }
  b = warp_best(b);
  if (t % 32 == 0) warp_bests[t / 32] = b;
  __syncthreads();
  if (t < 32) {
    b = t < argmax::kThreads / 32 ? warp_bests[t] : argmax::none();
    b = warp_best(b);
    if (t == 0) partials[static_cast<std::int64_t>(blockIdx.x) * gridDim.y + chunk] = b;
  }
}

__global__ void argmax_merge_kernel(const float* logits, std::int64_t stride, std::int64_t vocab,
                                    const std::int32_t* rows, std::int64_t chunks, const argmax::Best* partials,
                                    std::int32_t* out) {
  const std::int64_t row = blockIdx.x;
  argmax::Best b = argmax::none();
  for (std::int64_t c = threadIdx.x; c < chunks; c += 32) argmax::merge(b, partials[row * chunks + c]);
  b = warp_best(b);
  if (threadIdx.x == 0) {
    const float first = vocab > 0 ? logits[static_cast<std::int64_t>(rows[row]) * stride] : 0.0f;
    out[row] = argmax::token(b, first != first);
  }
}

}  // namespace

void launch_convert_2d(const void* src, int src_dtype, std::int64_t src_stride, void* dst, int dst_dtype,
                       std::int64_t dst_stride, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  convert_2d_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(src, src_dtype, src_stride, dst, dst_dtype,
                                                                     dst_stride, rows, cols);
}

void launch_fill_2d(float* dst, std::int64_t stride, std::int64_t rows, std::int64_t cols, float value,
                    cudaStream_t stream) {
  if (rows * cols == 0) return;
  fill_2d_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(dst, stride, rows, cols, value);
}

void launch_add_bias(float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols, const void* bias,
                     int bias_dtype, cudaStream_t stream) {
  if (rows * cols == 0) return;
  add_bias_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(c, ldc, rows, cols, bias, bias_dtype);
}

void launch_embedding(const std::int32_t* ids, std::int64_t n, const void* table, int table_dtype,
                      std::int64_t table_stride, float* out, std::int64_t out_stride, std::int64_t cols,
                      cudaStream_t stream) {
  if (n * cols == 0) return;
  embedding_kernel<<<grid_for(n * cols), kThreads, 0, stream>>>(ids, n, table, table_dtype, table_stride, out,
                                                                 out_stride, cols);
}

void launch_gather_rows(const float* src, std::int64_t src_stride, const std::int32_t* rows, std::int64_t n,
                        float* dst, std::int64_t dst_stride, std::int64_t cols, cudaStream_t stream) {
  if (n * cols == 0) return;
  gather_rows_kernel<<<grid_for(n * cols), kThreads, 0, stream>>>(src, src_stride, rows, n, dst, dst_stride, cols);
}

void launch_scatter_rows(const float* src, std::int64_t src_stride, const std::int32_t* rows, std::int64_t n,
                         float* dst, std::int64_t dst_stride, std::int64_t cols, cudaStream_t stream) {
  if (n * cols == 0) return;
  scatter_rows_kernel<<<grid_for(n * cols), kThreads, 0, stream>>>(src, src_stride, rows, n, dst, dst_stride, cols);
}

void launch_add(float* x, std::int64_t x_stride, const float* y, std::int64_t y_stride, std::int64_t rows,
                std::int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  add_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(x, x_stride, y, y_stride, rows, cols);
}

void launch_add_rmsnorm(float* x, std::int64_t x_stride, const float* delta, std::int64_t delta_stride,
                        const void* weight, int weight_dtype, float eps, float* out, std::int64_t out_stride,
                        std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const auto aligned = [](const void* ptr) { return ptr == nullptr || reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  if (cols % 4 == 0 && cols <= kNormThreads * kNormVec * 4 && x_stride % 4 == 0 && out_stride % 4 == 0 &&
      (delta == nullptr || delta_stride % 4 == 0) && aligned(x) && aligned(delta) && aligned(out) && aligned(weight)) {
    add_rmsnorm_vec_kernel<<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(
        x, x_stride, delta, delta_stride, weight, weight_dtype, eps, out, out_stride, static_cast<int>(cols));
    return;
  }
  add_rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, x_stride, delta, delta_stride, weight,
                                                                           weight_dtype, eps, out, out_stride, cols);
}

void launch_rotary(float* q, std::int64_t q_stride, std::int64_t q_heads, float* k, std::int64_t k_stride,
                   std::int64_t k_heads, const std::int32_t* positions, std::int64_t tokens, int head_dim,
                   int rotary_dim, const double* inv_freq, cudaStream_t stream) {
  const std::int64_t n = tokens * (q_heads + k_heads) * (rotary_dim / 2);
  if (n == 0) return;
  rotary_kernel<<<grid_for(n), kThreads, 0, stream>>>(q, q_stride, q_heads, k, k_stride, k_heads, positions, tokens,
                                                      head_dim, rotary_dim, inv_freq);
}

void launch_silu_and_mul(const float* gate_up, std::int64_t gate_up_stride, float* out, std::int64_t out_stride,
                         std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  if (cols % 4 == 0 && gate_up_stride % 4 == 0 && out_stride % 4 == 0 &&
      reinterpret_cast<std::uintptr_t>(gate_up) % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0) {
    silu_and_mul_vec_kernel<<<grid_for(rows * cols / 4), kThreads, 0, stream>>>(gate_up, gate_up_stride, out,
                                                                                 out_stride, rows, cols);
    return;
  }
  silu_and_mul_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(gate_up, gate_up_stride, out, out_stride, rows,
                                                                       cols);
}

void launch_kv_write(const float* k, std::int64_t k_stride, const float* v, std::int64_t v_stride,
                     const std::int64_t* slots, std::int64_t tokens, void* k_cache, void* v_cache, int cache_dtype,
                     std::int64_t width, float k_inv_scale, float v_inv_scale, cudaStream_t stream) {
  if (tokens * width == 0) return;
  const std::uintptr_t align = reinterpret_cast<std::uintptr_t>(k) | reinterpret_cast<std::uintptr_t>(v) |
                               reinterpret_cast<std::uintptr_t>(k_cache) | reinterpret_cast<std::uintptr_t>(v_cache);
  if (width % 4 == 0 && k_stride % 4 == 0 && v_stride % 4 == 0 && align % 16 == 0) {
    kv_write_vec_kernel<<<grid_for(tokens * width / 4), kThreads, 0, stream>>>(k, k_stride, v, v_stride, slots, tokens,
                                                                                k_cache, v_cache, cache_dtype, width,
                                                                                k_inv_scale, v_inv_scale);
    return;
  }
  kv_write_kernel<<<grid_for(tokens * width), kThreads, 0, stream>>>(k, k_stride, v, v_stride, slots, tokens, k_cache,
                                                                      v_cache, cache_dtype, width, k_inv_scale,
                                                                      v_inv_scale);
}

std::size_t argmax_rows_workspace(std::int64_t vocab, std::int64_t n) {
  return static_cast<std::size_t>(n * argmax::chunks(vocab < 1 ? 1 : vocab)) * sizeof(argmax::Best);
}

void launch_argmax_rows(const float* logits, std::int64_t stride, std::int64_t vocab, const std::int32_t* rows,
                        std::int64_t n, std::int32_t* out, void* workspace, cudaStream_t stream) {
  if (n == 0) return;
  // An empty vocabulary still runs both stages: one chunk with no candidate gives id 0.
  const std::int64_t chunks = argmax::chunks(vocab < 1 ? 1 : vocab);
  const bool vec = vocab % 4 == 0 && stride % 4 == 0 && reinterpret_cast<std::uintptr_t>(logits) % 16 == 0;
  auto* partials = static_cast<argmax::Best*>(workspace);
  argmax_chunks_kernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(chunks)), argmax::kThreads, 0, stream>>>(
      logits, stride, vocab, rows, vec, partials);
  argmax_merge_kernel<<<static_cast<unsigned>(n), 32, 0, stream>>>(logits, stride, vocab, rows, chunks, partials, out);
}

void launch_moe_topk(const float* logits, std::int64_t logits_stride, std::int64_t tokens, int experts, int top_k,
                     bool renormalize, std::int32_t* ids, std::int64_t ids_stride, float* weights,
                     std::int64_t weights_stride, cudaStream_t stream) {
  if (tokens == 0) return;
  moe_topk_kernel<<<grid_for(tokens), kThreads, 0, stream>>>(logits, logits_stride, tokens, experts, top_k,
                                                              renormalize, ids, ids_stride, weights, weights_stride);
}

void launch_moe_combine(const float* pair_out, const float* weights, std::int64_t weights_stride, int top_k,
                        float* out, std::int64_t out_stride, std::int64_t tokens, std::int64_t hidden,
                        cudaStream_t stream) {
  if (tokens * hidden == 0) return;
  moe_combine_kernel<<<grid_for(tokens * hidden), kThreads, 0, stream>>>(pair_out, weights, weights_stride, top_k, out,
                                                                          out_stride, tokens, hidden);
}

}  // namespace twin::cuda
