// Paged attention for prefill chunks, tiled in the FlashAttention manner.
// A block takes kAttnTileRows consecutive query rows of one sequence and one
// query head, and walks the keys they see in tiles of 32 (one key per lane):
// each K/V tile is read from the paged cache once, through the block table,
// into shared memory and used by all the tile's query rows, where the
// split-K kernel reads it once per row. Softmax is online (running max and
// sum per row, the accumulator rescaled when the max grows), so no score
// matrix is kept and the output is written once, normalised.
//
// Work split: 4 warps, warp w owns the tile's rows w, w + 4, w + 8, w + 12.
// For a K tile, lane j scores key j against the warp's rows (K rows padded
// to head_dim + 1 floats, so the 32 lanes hit 32 banks); then for each row
// the lanes own output dims lane, lane + 32, ... and accumulate the V rows,
// each key's weight broadcast by a shuffle. Arithmetic is f32 on the CUDA
// cores: no tensor cores yet (docs/cuda.md).
#include "engine/backend/cuda/cuda_device_util.cuh"
#include "engine/backend/paged_index.hpp"

namespace twin::cuda {

namespace {

constexpr int kTileThreads = 128;
constexpr int kTileWarps = kTileThreads / 32;
constexpr int kKeysPerTile = 32;  // one key per lane
constexpr int kRowsPerWarp = kAttnTileRows / kTileWarps;
constexpr int kMaxHeadDim = 256;
constexpr std::size_t kDefaultSmem = 48 * 1024;  // usable without opting in

std::size_t tile_smem_bytes(int head_dim) {
  const std::size_t hd = static_cast<std::size_t>(head_dim);
  return sizeof(float) * (kAttnTileRows * hd + kKeysPerTile * (hd + 1) + kKeysPerTile * hd);
}

// kDims: output dims per lane, ceil(head_dim / 32).
template <int kDims>
__global__ void __launch_bounds__(kTileThreads)
    attention_tile_kernel(AttnParams p, const AttnTile* tiles, int sliding_window) {
  extern __shared__ float smem[];
  const int hd = p.head_dim;
  float* q_s = smem;                            // [kAttnTileRows][hd]
  float* k_s = q_s + kAttnTileRows * hd;        // [kKeysPerTile][hd + 1]
  float* v_s = k_s + kKeysPerTile * (hd + 1);  // [kKeysPerTile][hd]

  const AttnTile t = tiles[blockIdx.x];
  const int head = blockIdx.y;
  const int kv_head = head / (p.num_heads / p.kv_heads);
  const std::int32_t* table = p.tables + t.table_offset;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  // Rows past count are zeros: their scores are computed with the others'
  // and dropped, but never read uninitialised memory.
  for (int i = threadIdx.x; i < kAttnTileRows * hd; i += kTileThreads) {
    const int r = i / hd, d = i % hd;
    q_s[i] = r < t.count
                 ? p.q[static_cast<std::int64_t>(t.row + r) * p.q_stride + static_cast<std::int64_t>(head) * hd + d]
                 : 0.0f;
  }

  float acc[kRowsPerWarp][kDims];
  float row_max[kRowsPerWarp], row_sum[kRowsPerWarp];
  for (int r = 0; r < kRowsPerWarp; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
    for (int c = 0; c < kDims; ++c) acc[r][c] = 0.0f;
  }

  const paged::KeyRange keys = paged::tile_keys(t.position, t.count, sliding_window);
  for (std::int32_t kb = keys.begin; kb < keys.end; kb += kKeysPerTile) {
    const int kn = min(kKeysPerTile, keys.end - kb);
    __syncthreads();  // the previous tile is no longer read (and q_s is written)
    for (int i = threadIdx.x; i < kKeysPerTile * hd; i += kTileThreads) {
      const int j = i / hd, d = i % hd;
      float kv_k = 0.0f, kv_v = 0.0f;  // keys past the end: zeros, masked below
      if (j < kn) {
        const std::int64_t base =
            paged::kv_offset(paged::slot_of(table, p.block_size, kb + j), p.kv_heads, hd, kv_head) + d;
        kv_k = load_elem(p.k_cache, p.cache_dtype, base) * p.k_scale;
        kv_v = load_elem(p.v_cache, p.cache_dtype, base) * p.v_scale;
      }
      k_s[j * (hd + 1) + d] = kv_k;
      v_s[j * hd + d] = kv_v;
    }
    __syncthreads();

    // Lane j scores key kb + j against each of the warp's rows.
    float score[kRowsPerWarp];
    for (int r = 0; r < kRowsPerWarp; ++r) score[r] = 0.0f;
    const float* krow = k_s + lane * (hd + 1);
    for (int d = 0; d < hd; ++d) {
      const float kd = krow[d];
      for (int r = 0; r < kRowsPerWarp; ++r) score[r] += q_s[(warp + r * kTileWarps) * hd + d] * kd;
    }

    const std::int32_t key = kb + lane;
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int local = warp + r * kTileWarps;
      if (local >= t.count) break;  // warp-uniform
      const std::int32_t pos = t.position + local;
      const bool visible = lane < kn && paged::key_visible(key, pos, sliding_window);
      const float s = visible ? score[r] * p.scale : -INFINITY;
      const float tile_max = warp_max(s);
      if (tile_max == -INFINITY) continue;  // none of this tile's keys is visible to the row: warp-uniform
      const float new_max = fmaxf(row_max[r], tile_max);
      const float rescale = expf(row_max[r] - new_max);  // 0 on the row's first visible tile
      const float w = visible ? expf(s - new_max) : 0.0f;
      row_sum[r] = row_sum[r] * rescale + warp_sum(w);
      row_max[r] = new_max;
      for (int c = 0; c < kDims; ++c) acc[r][c] *= rescale;
      for (int j = 0; j < kn; ++j) {
        const float wj = __shfl_sync(0xffffffffu, w, j);
        const float* vrow = v_s + j * hd;
        for (int c = 0; c < kDims; ++c) {
          const int d = lane + 32 * c;
          if (d < hd) acc[r][c] += wj * vrow[d];
        }
      }
    }
  }

  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int local = warp + r * kTileWarps;
    if (local >= t.count) break;
    // Every row sees at least its own key, so row_sum > 0.
    float* orow = p.out + static_cast<std::int64_t>(t.row + local) * p.out_stride + static_cast<std::int64_t>(head) * hd;
    for (int c = 0; c < kDims; ++c) {
      const int d = lane + 32 * c;
      if (d < hd) orow[d] = acc[r][c] / row_sum[r];
    }
  }
}

template <int kDims>
void launch_tiles(const AttnParams& p, const AttnTile* tiles, int num_tiles, int sliding_window,
                  cudaStream_t stream) {
  const std::size_t smem = tile_smem_bytes(p.head_dim);
  if (smem > kDefaultSmem) {
    cudaFuncSetAttribute(attention_tile_kernel<kDims>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  }
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>(p.num_heads));
  attention_tile_kernel<kDims><<<grid, kTileThreads, smem, stream>>>(p, tiles, sliding_window);
}

}  // namespace

bool attention_tiles_supported(int head_dim) {
  if (head_dim <= 0 || head_dim > kMaxHeadDim) return false;
  const std::size_t smem = tile_smem_bytes(head_dim);
  if (smem <= kDefaultSmem) return true;
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) return false;
  return smem <= static_cast<std::size_t>(optin);
}

void launch_paged_attention_tiles(const AttnParams& p, const AttnTile* tiles, int num_tiles, int sliding_window,
                                  cudaStream_t stream) {
  if (num_tiles == 0) return;
  // Instances for the common head sizes; others round up (the lanes past
  // head_dim skip their dims).
  switch ((p.head_dim + 31) / 32) {
    case 1: launch_tiles<1>(p, tiles, num_tiles, sliding_window, stream); break;
    case 2: launch_tiles<2>(p, tiles, num_tiles, sliding_window, stream); break;
    case 3: launch_tiles<3>(p, tiles, num_tiles, sliding_window, stream); break;
    case 4: launch_tiles<4>(p, tiles, num_tiles, sliding_window, stream); break;
    case 5:
    case 6: launch_tiles<6>(p, tiles, num_tiles, sliding_window, stream); break;
    default: launch_tiles<8>(p, tiles, num_tiles, sliding_window, stream); break;
  }
}

}  // namespace twin::cuda
