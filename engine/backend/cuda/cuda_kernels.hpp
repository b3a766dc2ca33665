#pragma once
// Launchers of the CUDA backend's own kernels (cuda_kernels.cu,
// cuda_attention.cu, cuda_sampling.cu). Plain pointers and sizes only, so
// the host code that calls them is ordinary C++ (built by the host compiler
// with -Werror) and nvcc compiles as little as possible. Every launcher
// enqueues on `stream` and returns at once; the caller checks
// cudaGetLastError (launch_sample_rows returns its error instead).
//
// dtype codes are twin::ElemType's values: 0 f32, 1 bf16, 2 f16.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace twin::cuda {

// Dtype codes: twin::ElemType's values (f32, bf16, f16, i32, i8, f8e4m3).
constexpr int kF32 = 0, kBf16 = 1, kF16 = 2, kF8E4M3 = 5;

// dst[r, c] = convert(src[r, c]) between f32/bf16/f16 (strides in elements).
void launch_convert_2d(const void* src, int src_dtype, std::int64_t src_stride, void* dst, int dst_dtype,
                       std::int64_t dst_stride, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
void launch_fill_2d(float* dst, std::int64_t stride, std::int64_t rows, std::int64_t cols, float value,
                    cudaStream_t stream);
// c[r, :] += bias[0, :]
void launch_add_bias(float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols, const void* bias,
                     int bias_dtype, cudaStream_t stream);
// out[i, :] = table[ids[i], :] as f32
void launch_embedding(const std::int32_t* ids, std::int64_t n, const void* table, int table_dtype,
                      std::int64_t table_stride, float* out, std::int64_t out_stride, std::int64_t cols,
                      cudaStream_t stream);
// dst[i, :] = src[rows[i], :]
void launch_gather_rows(const float* src, std::int64_t src_stride, const std::int32_t* rows, std::int64_t n,
                        float* dst, std::int64_t dst_stride, std::int64_t cols, cudaStream_t stream);
// dst[rows[i], :] = src[i, :]
void launch_scatter_rows(const float* src, std::int64_t src_stride, const std::int32_t* rows, std::int64_t n,
                         float* dst, std::int64_t dst_stride, std::int64_t cols, cudaStream_t stream);
void launch_add(float* x, std::int64_t x_stride, const float* y, std::int64_t y_stride, std::int64_t rows,
                std::int64_t cols, cudaStream_t stream);
// delta == nullptr: out = rmsnorm(x) * w. Else x += delta first (the fused residual step).
void launch_add_rmsnorm(float* x, std::int64_t x_stride, const float* delta, std::int64_t delta_stride,
                        const void* weight, int weight_dtype, float eps, float* out, std::int64_t out_stride,
                        std::int64_t rows, std::int64_t cols, cudaStream_t stream);
// inv_freq: rotary_dim / 2 frequencies in device memory (rope_inv_freq).
void launch_rotary(float* q, std::int64_t q_stride, std::int64_t q_heads, float* k, std::int64_t k_stride,
                   std::int64_t k_heads, const std::int32_t* positions, std::int64_t tokens, int head_dim,
                   int rotary_dim, const double* inv_freq, cudaStream_t stream);
void launch_silu_and_mul(const float* gate_up, std::int64_t gate_up_stride, float* out, std::int64_t out_stride,
                         std::int64_t rows, std::int64_t cols, cudaStream_t stream);
// W8A8 fp8 GEMM (cuda_fp8_gemm.cu): rows of A [m, k] (stride lda) into E4M3
// q [m, k] (contiguous), one scale per row (max |row| / 448, 1 for a zero
// row); then c[r, j] (+)= product[r, j] (contiguous [m, n]) x row_scale[r] x
// col_scale[j].
void launch_quantize_rows_fp8(const float* a, std::int64_t lda, std::int64_t m, std::int64_t k, std::uint8_t* q,
                              float* scales, cudaStream_t stream);
void launch_fp8_scale_out(const float* product, std::int64_t m, std::int64_t n, const float* row_scale,
                          const float* col_scale, float* c, std::int64_t ldc, bool accumulate, cudaStream_t stream);
// k/v rows [tokens, width] -> cache slot slots[t] (negative: skipped), each
// element times k_inv_scale / v_inv_scale first (1 / an fp8 cache's scales).
void launch_kv_write(const float* k, std::int64_t k_stride, const float* v, std::int64_t v_stride,
                     const std::int64_t* slots, std::int64_t tokens, void* k_cache, void* v_cache, int cache_dtype,
                     std::int64_t width, float k_inv_scale, float v_inv_scale, cudaStream_t stream);
void launch_moe_topk(const float* logits, std::int64_t logits_stride, std::int64_t tokens, int experts, int top_k,
                     bool renormalize, std::int32_t* ids, std::int64_t ids_stride, float* weights,
                     std::int64_t weights_stride, cudaStream_t stream);
// out[t, :] = sum_j weights[t, j] * pair_out[t * top_k + j, :]
void launch_moe_combine(const float* pair_out, const float* weights, std::int64_t weights_stride, int top_k,
                        float* out, std::int64_t out_stride, std::int64_t tokens, std::int64_t hidden,
                        cudaStream_t stream);
// out[i] = the argmax of logits[rows[i], 0:vocab] exactly as the host's
// sample_reference picks it: the lowest id of the largest value, NaNs never
// chosen, and id 0 when logits[row, 0] is NaN (the host's scan never moves).
// Two stages (chunks of the vocabulary, then a merge per row) through
// `workspace`: argmax_rows_workspace(vocab, n) bytes of device memory.
std::size_t argmax_rows_workspace(std::int64_t vocab, std::int64_t n);
void launch_argmax_rows(const float* logits, std::int64_t stride, std::int64_t vocab, const std::int32_t* rows,
                        std::int64_t n, std::int32_t* out, void* workspace, cudaStream_t stream);

// A row sampled with temperature / top-k / top-p, resolved on the host: the
// logits row and its parameters, u = sampling_uniform(seed, request,
// token_index).
struct SampleRow {
  double u;
  float temperature;
  float top_p;
  std::int32_t top_k;
  std::int32_t row;
};
// Device workspace launch_sample_rows needs for n rows of vocab (it sorts
// the rows in chunks, so this stays under ~400 MiB however many rows).
std::size_t sample_rows_workspace(std::int64_t vocab, std::int64_t n);
// out[i] = sample_reference's token for logits[rows[i].row, 0:vocab] (up to
// exp's last ulp, cuda_sampling.cu). rows and out are device memory. Returns
// the first launch or CUB error.
cudaError_t launch_sample_rows(const float* logits, std::int64_t stride, std::int64_t vocab, const SampleRow* rows,
                               std::int64_t n, void* workspace, std::size_t workspace_bytes, std::int32_t* out,
                               cudaStream_t stream);

// One query row of paged attention, resolved on the host: the q/out row, the
// keys it sees [first_key, position], and its block table in `tables`.
struct AttnRow {
  std::int32_t row;
  std::int32_t position;
  std::int32_t first_key;
  std::int32_t table_offset;
};

struct AttnParams {
  const float* q;
  std::int64_t q_stride;
  float* out;
  std::int64_t out_stride;
  const void* k_cache;
  const void* v_cache;
  int cache_dtype;
  int block_size;
  int kv_heads;
  int head_dim;
  int num_heads;
  float scale;
  float k_scale, v_scale;  // an fp8 cache's per-tensor scales (1 otherwise): read = stored x scale
  const AttnRow* rows;
  int num_rows;
  const std::int32_t* tables;
  int partition_size;  // keys per split-K partition
  int max_partitions;  // over all rows
  float* part_acc;     // [rows, heads, max_partitions, head_dim] when max_partitions > 1
  float* part_ml;      // [rows, heads, max_partitions, 2] (running max, sum of exp)
};

// Keys per partition of the split-K kernel; the scores of one partition sit
// in shared memory.
constexpr int kAttnPartitionSize = 256;

void launch_paged_attention(const AttnParams& p, cudaStream_t stream);

// A tile of up to kAttnTileRows consecutive query rows of one sequence
// (a prefill chunk): q/out rows row .. row + count - 1 at positions
// position .. position + count - 1, one block table.
struct AttnTile {
  std::int32_t row;
  std::int32_t position;
  std::int32_t count;
  std::int32_t table_offset;
};

// Query rows per tile, and the fewest new tokens a sequence needs to be
// tiled (shorter chunks are cheaper as split-K rows: they keep long
// contexts spread over many blocks).
constexpr int kAttnTileRows = 16;
constexpr int kAttnTileMinRows = 4;

// Whether the tiled kernel runs this head_dim on the current device: at
// most 256, and its shared memory within the device's opt-in limit.
bool attention_tiles_supported(int head_dim);

// FlashAttention-style prefill over tiles: p's q/out/cache/shape fields,
// the tiles and tables; rows/partitions are unused.
void launch_paged_attention_tiles(const AttnParams& p, const AttnTile* tiles, int num_tiles, int sliding_window,
                                  cudaStream_t stream);

// Prefill attention on tensor cores (cuda_attention_mma.cu): a block takes
// kAttnMmaRows packed rows (query x head of one KV head's GQA group,
// paged::packed_row) of one sequence's chunk and walks its keys
// kAttnMmaKeys at a time. Q, K, V and the softmax weights P are rounded to
// bf16 for the mma; scores, softmax and the output accumulate in f32.
struct AttnMmaTile {
  std::int32_t row;           // q/out row of the chunk's first new token
  std::int32_t position;      // its position
  std::int32_t num_query;     // the chunk's new tokens
  std::int32_t packed_begin;  // the tile's first packed row
  std::int32_t table_offset;
};

constexpr int kAttnMmaRows = 64;
constexpr int kAttnMmaKeys = 64;

// Whether the tensor-core kernel runs this shape on the current device:
// head_dim 64 or 128, an f32 or bf16 cache, compute capability 8.0 or newer.
bool attention_mma_supported(int head_dim, int cache_dtype);

// TWIN_CUDA_ATTENTION=reference in the environment selects the f32 tiled
// kernel for prefill instead (read by each CudaBackend when it is made).
bool attention_mma_disabled_by_env();

// p's q/out/cache/shape fields and tables; the grid is (num_tiles,
// kv_heads). K and V must be 16-byte aligned.
void launch_paged_attention_mma(const AttnParams& p, const AttnMmaTile* tiles, int num_tiles, int sliding_window,
                                cudaStream_t stream);

}  // namespace twin::cuda
