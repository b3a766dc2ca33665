// The CUDA backend's element-wise, normalisation, rotary, KV-write and MoE
// kernels. Deliberately simple: grid-stride loops over elements, one block
// per row for reductions, runtime dtype codes instead of templates (one
// instantiation each keeps the build short). Launchers: cuda_kernels.hpp.
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
                                std::int64_t width) {
  TWIN_GRID_STRIDE(i, tokens * width) {
    const std::int64_t t = i / width, e = i % width;
    const std::int64_t slot = slots[t];
    if (slot < 0) continue;
    store_elem(kc, cd, slot * width + e, k[t * ks + e]);
    store_elem(vc, cd, slot * width + e, v[t * vs + e]);
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

// One block per row: each thread keeps the first largest value of its
// strided slice, then a tree reduction keeps the larger value, the lower id
// on ties. That is the host's left-to-right scan, whatever the block size.
__global__ void argmax_rows_kernel(const float* logits, std::int64_t stride, std::int64_t vocab,
                                   const std::int32_t* rows, std::int32_t* out) {
  __shared__ float best_v[kThreads];
  __shared__ std::int64_t best_i[kThreads];
  const float* x = logits + static_cast<std::int64_t>(rows[blockIdx.x]) * stride;
  float v = -INFINITY;
  std::int64_t id = -1;  // none yet
  for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float e = x[i];
    if (e != e) continue;  // NaN: never chosen
    if (id < 0 || e > v) {
      v = e;
      id = i;
    }
  }
  best_v[threadIdx.x] = v;
  best_i[threadIdx.x] = id;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const unsigned o = threadIdx.x + s;
      const std::int64_t io = best_i[o], it = best_i[threadIdx.x];
      if (io >= 0 && (it < 0 || best_v[o] > best_v[threadIdx.x] || (best_v[o] == best_v[threadIdx.x] && io < it))) {
        best_v[threadIdx.x] = best_v[o];
        best_i[threadIdx.x] = io;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const bool first_nan = vocab > 0 && x[0] != x[0];
    out[blockIdx.x] = static_cast<std::int32_t>(first_nan || best_i[0] < 0 ? 0 : best_i[0]);
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
  silu_and_mul_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(gate_up, gate_up_stride, out, out_stride, rows,
                                                                       cols);
}

void launch_kv_write(const float* k, std::int64_t k_stride, const float* v, std::int64_t v_stride,
                     const std::int64_t* slots, std::int64_t tokens, void* k_cache, void* v_cache, int cache_dtype,
                     std::int64_t width, cudaStream_t stream) {
  if (tokens * width == 0) return;
  kv_write_kernel<<<grid_for(tokens * width), kThreads, 0, stream>>>(k, k_stride, v, v_stride, slots, tokens, k_cache,
                                                                      v_cache, cache_dtype, width);
}

void launch_argmax_rows(const float* logits, std::int64_t stride, std::int64_t vocab, const std::int32_t* rows,
                        std::int64_t n, std::int32_t* out, cudaStream_t stream) {
  if (n == 0) return;
  argmax_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, stride, vocab, rows, out);
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
