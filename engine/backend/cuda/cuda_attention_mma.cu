// Paged prefill attention on tensor cores, in the FlashAttention-2 manner.
//
// A block of 4 warps takes a tile of kAttnMmaRows (64) packed rows of one
// chunk — query x head of one KV head's GQA group (paged::packed_row), so a
// K/V tile read once serves the whole group — and walks the keys the tile
// sees (paged::tile_keys) kAttnMmaKeys (64) at a time. Warp w owns packed
// rows 16w .. 16w + 15 and keeps them to the end: its Q fragments (loaded
// once, bf16), the running max and sum of its rows and its 16 x head_dim
// output accumulator all stay in registers.
//
// Per key tile: the block gathers the 64 K and V rows through the block table
// into shared memory as bf16 (any block size: one slot per row, looked up
// once per tile into a table in shared memory), then each warp
//   S = Q·Kᵀ     mma.sync m16n8k16 bf16 -> f32 (K rows via ldmatrix),
//   mask         causal / window per element, skipped for tiles all rows see,
//   softmax      online, in f32 with exp2 (the scale folded with log2 e),
//   O += P·V     P rounded to bf16 straight from the S accumulators (their
//                layout is the A operand's), V via ldmatrix .trans.
// Shared memory rows are padded by 8 bf16 (16 bytes) so ldmatrix's eight row
// addresses fall in eight distinct 16-byte bank groups.
//
// Fragment layouts and the kernel's addressing are in mma_layout.hpp and
// checked on the host against a model of the instructions
// (tests/backend_cuda/test_attention_mma_host.cpp), with the whole tile loop.
#include <cuda_bf16.h>

#include "engine/backend/cuda/cuda_device_util.cuh"
#include "engine/backend/cuda/mma_layout.hpp"
#include "engine/backend/paged_index.hpp"

#include <cstdlib>
#include <cstring>

namespace twin::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = kAttnMmaRows;  // packed query rows per block, 16 per warp
constexpr int kKeys = kAttnMmaKeys;  // keys per K/V tile
static_assert(kRows == 16 * kWarps, "one m16 row block per warp");
static_assert(kKeys % 16 == 0 && kKeys <= kThreads, "key tile: whole k16 steps, one slot lookup per thread");
constexpr float kLog2e = 1.4426950408889634f;

template <int kDim>
struct Layout {
  static constexpr int kStride = kDim + 8;  // bf16 per shared row: +16 bytes against bank conflicts
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kRows * kStride;
  static constexpr int kV = kK + kKeys * kStride;
  static constexpr int kEnd = kV + kKeys * kStride;  // in bf16; the slot table follows
  static constexpr std::size_t kBytes = kEnd * sizeof(std::uint16_t) + kKeys * sizeof(std::int64_t);
  static_assert((kStride * 2) % 16 == 0, "ldmatrix rows and 16-byte stores stay aligned");
  static_assert((kEnd * 2) % 8 == 0, "the slot table is 8-byte aligned");
};

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo, round to nearest even
  std::uint32_t u;
  memcpy(&u, &h, sizeof(u));
  return u;
}

__device__ __forceinline__ float bf16_lo(std::uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf16_hi(std::uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// The "memory" clobber keeps the loads after the __syncthreads that
// publishes the tile.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const std::uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p))
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const std::uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p))
               : "memory");
}

// c += a · b for one 16 x 8 x 16 step (fragments as in mma_layout.hpp).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Gathers the tile's K and V rows (cache element offsets in base_s; -1: past
// the range, zeros, so a masked weight of 0 never meets garbage) into shared
// memory as bf16. Loads are issued in batches before their stores so each
// thread keeps several 16-byte requests in flight.
template <int kDim>
__device__ __forceinline__ void load_kv_tile(const AttnParams& p, std::uint16_t* k_s, std::uint16_t* v_s,
                                             const std::int64_t* base_s) {
  using L = Layout<kDim>;
  if (p.cache_dtype == kBf16) {
    constexpr int kChunks = kDim / 8;  // 16-byte chunks per row
    constexpr int kPer = kKeys * kChunks / kThreads;
    static_assert(kKeys * kChunks % kThreads == 0, "whole chunks per thread");
    const auto* kc = static_cast<const std::uint16_t*>(p.k_cache);
    const auto* vc = static_cast<const std::uint16_t*>(p.v_cache);
    constexpr int kBatch = 4;  // uint4s of K and of V in flight per thread
    static_assert(kPer % kBatch == 0, "whole batches");
#pragma unroll 1
    for (int b = 0; b < kPer; b += kBatch) {
      uint4 kr[kBatch], vr[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int c = threadIdx.x + (b + i) * kThreads, row = c / kChunks, col = (c % kChunks) * 8;
        const std::int64_t base = base_s[row];
        kr[i] = base >= 0 ? __ldg(reinterpret_cast<const uint4*>(kc + base + col)) : make_uint4(0, 0, 0, 0);
        vr[i] = base >= 0 ? __ldg(reinterpret_cast<const uint4*>(vc + base + col)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int c = threadIdx.x + (b + i) * kThreads, row = c / kChunks, col = (c % kChunks) * 8;
        *reinterpret_cast<uint4*>(k_s + row * L::kStride + col) = kr[i];
        *reinterpret_cast<uint4*>(v_s + row * L::kStride + col) = vr[i];
      }
    }
  } else if (p.cache_dtype == kF8E4M3) {  // fp8, times its scale and rounded to bf16 on the way
    constexpr int kChunks = kDim / 8;         // 8-byte chunks (8 elements) per row
    constexpr int kPer = kKeys * kChunks / kThreads;
    constexpr int kBatch = 4;  // uint2s of K and of V in flight per thread
    static_assert(kPer % kBatch == 0, "whole batches");
    const auto* kc = static_cast<const std::uint8_t*>(p.k_cache);
    const auto* vc = static_cast<const std::uint8_t*>(p.v_cache);
    const auto widen = [](uint2 x, float scale) {
      std::uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const std::uint32_t word = i < 2 ? x.x : x.y;
        const int shift = 16 * (i % 2);
        w[i] = pack_bf16(fp8_to_f32(static_cast<std::uint8_t>(word >> shift)) * scale,
                         fp8_to_f32(static_cast<std::uint8_t>(word >> (shift + 8))) * scale);
      }
      return make_uint4(w[0], w[1], w[2], w[3]);
    };
#pragma unroll 1
    for (int b = 0; b < kPer; b += kBatch) {
      uint2 kr[kBatch], vr[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int c = threadIdx.x + (b + i) * kThreads, row = c / kChunks, col = (c % kChunks) * 8;
        const std::int64_t base = base_s[row];
        kr[i] = base >= 0 ? __ldg(reinterpret_cast<const uint2*>(kc + base + col)) : make_uint2(0, 0);
        vr[i] = base >= 0 ? __ldg(reinterpret_cast<const uint2*>(vc + base + col)) : make_uint2(0, 0);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int c = threadIdx.x + (b + i) * kThreads, row = c / kChunks, col = (c % kChunks) * 8;
        *reinterpret_cast<uint4*>(k_s + row * L::kStride + col) = widen(kr[i], p.k_scale);
        *reinterpret_cast<uint4*>(v_s + row * L::kStride + col) = widen(vr[i], p.v_scale);
      }
    }
  } else {  // f32, converted on the way
    constexpr int kChunks = kDim / 4;
    constexpr int kPer = kKeys * kChunks / kThreads;
    constexpr int kBatch = 4;  // float4s of K and of V in flight per thread
    static_assert(kPer % kBatch == 0, "whole batches");
    const auto* kc = static_cast<const float*>(p.k_cache);
    const auto* vc = static_cast<const float*>(p.v_cache);
#pragma unroll 1
    for (int b = 0; b < kPer; b += kBatch) {
      float4 kr[kBatch], vr[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int c = threadIdx.x + (b + i) * kThreads, row = c / kChunks, col = (c % kChunks) * 4;
        const std::int64_t base = base_s[row];
        kr[i] = base >= 0 ? __ldg(reinterpret_cast<const float4*>(kc + base + col)) : make_float4(0, 0, 0, 0);
        vr[i] = base >= 0 ? __ldg(reinterpret_cast<const float4*>(vc + base + col)) : make_float4(0, 0, 0, 0);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int c = threadIdx.x + (b + i) * kThreads, row = c / kChunks, col = (c % kChunks) * 4;
        *reinterpret_cast<uint2*>(k_s + row * L::kStride + col) =
            make_uint2(pack_bf16(kr[i].x, kr[i].y), pack_bf16(kr[i].z, kr[i].w));
        *reinterpret_cast<uint2*>(v_s + row * L::kStride + col) =
            make_uint2(pack_bf16(vr[i].x, vr[i].y), pack_bf16(vr[i].z, vr[i].w));
      }
    }
  }
}

template <int kDim>
__global__ void __launch_bounds__(kThreads, 3)
    attention_mma_kernel(AttnParams p, const AttnMmaTile* tiles, int sliding_window) {
  using L = Layout<kDim>;
  constexpr int kSteps = kDim / 16;    // k16 steps of Q·Kᵀ
  constexpr int kDimTiles = kDim / 8;  // n8 tiles of the output
  constexpr int kKeyTiles = kKeys / 8;  // n8 tiles of S

  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* smem = reinterpret_cast<std::uint16_t*>(smem_raw);
  std::uint16_t* q_s = smem + L::kQ;
  std::uint16_t* k_s = smem + L::kK;
  std::uint16_t* v_s = smem + L::kV;
  auto* base_s = reinterpret_cast<std::int64_t*>(smem + L::kEnd);

  const AttnMmaTile t = tiles[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.kv_heads;
  const int total = t.num_query * group;  // the chunk's packed rows
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::int32_t* table = p.tables + t.table_offset;

  // Q, rounded to bf16. Padding rows are zeros (computed, never stored).
  for (int i = threadIdx.x; i < kRows * kDim; i += kThreads) {
    const int r = i / kDim, d = i % kDim;
    const int packed = t.packed_begin + r;
    float x = 0.0f;
    if (packed < total) {
      const paged::PackedRow pr = paged::packed_row(packed, group);
      x = p.q[static_cast<std::int64_t>(t.row + pr.query) * p.q_stride +
              static_cast<std::int64_t>(kv_head * group + pr.head) * kDim + d];
    }
    q_s[r * L::kStride + d] = static_cast<std::uint16_t>(pack_bf16(x, 0.0f) & 0xffffu);
  }
  __syncthreads();
  std::uint32_t qf[kSteps][4];
  {
    const mma::RowCol a = mma::ldsm_a_address(lane);
#pragma unroll
    for (int s = 0; s < kSteps; ++s) ldmatrix_x4(qf[s], q_s + (warp * 16 + a.row) * L::kStride + s * 16 + a.col);
  }

  // This thread's two rows (accumulator elements 0, 1 and 2, 3).
  const int last_packed = min(t.packed_begin + kRows, total) - 1;
  const std::int32_t pos_lo = paged::packed_position(t.position, t.packed_begin, total, group);
  const std::int32_t pos_hi = paged::packed_position(t.position, last_packed, total, group);
  std::int32_t row_pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_pos[h] = paged::packed_position(t.position, t.packed_begin + warp * 16 + mma::acc_element(lane, 2 * h).row,
                                        total, group);
  }

  float o[kDimTiles][4];
#pragma unroll
  for (int j = 0; j < kDimTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this thread's share: its columns of the row
  const float scale_log2 = p.scale * kLog2e;

  const paged::KeyRange keys = paged::tile_keys(pos_lo, pos_hi - pos_lo + 1, sliding_window);
  for (std::int32_t kb = keys.begin; kb < keys.end; kb += kKeys) {
    __syncthreads();  // every warp is done with the previous tile and its slot table
    if (threadIdx.x < kKeys) {
      const std::int32_t key = kb + static_cast<std::int32_t>(threadIdx.x);
      base_s[threadIdx.x] =
          key < keys.end ? paged::kv_offset(paged::slot_of(table, p.block_size, key), p.kv_heads, kDim, kv_head) : -1;
    }
    __syncthreads();
    load_kv_tile<kDim>(p, k_s, v_s, base_s);
    __syncthreads();

    // S = Q·Kᵀ for the warp's 16 rows x 64 keys.
    float s[kKeyTiles][4];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    {
      const mma::RowCol b = mma::ldsm_b_address(lane);
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
#pragma unroll
        for (int j = 0; j < kKeyTiles; j += 2) {
          std::uint32_t kf[4];
          ldmatrix_x4(kf, k_s + (j * 8 + b.row) * L::kStride + st * 16 + b.col);
          mma_bf16(s[j], qf[st], kf[0], kf[1]);
          mma_bf16(s[j + 1], qf[st], kf[2], kf[3]);
        }
      }
    }

    // Scale (log2 domain), mask, and this tile's max per row.
    const bool unmasked = paged::key_tile_unmasked(kb, kKeys, pos_lo, pos_hi, sliding_window);
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float x = s[j][i] * scale_log2;
        if (!unmasked) {
          const std::int32_t key = kb + j * 8 + mma::acc_element(lane, i).col;
          if (!paged::key_visible(key, row_pos[i / 2], sliding_window)) x = -INFINITY;
        }
        s[j][i] = x;
        tile_max[i / 2] = fmaxf(tile_max[i / 2], x);
      }
    }
    // The 4 lanes of a quad hold one row's 64 columns.
    float ref[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      const float new_max = fmaxf(row_max[h], tile_max[h]);
      // A row none of whose keys so far is visible keeps max -inf: subtract
      // 0 instead so exp2 gives 0, not NaN.
      ref[h] = new_max == -INFINITY ? 0.0f : new_max;
      const float rescale = exp2f(row_max[h] - ref[h]);  // 0 while the row had nothing
      row_max[h] = new_max;
      row_sum[h] *= rescale;
#pragma unroll
      for (int j = 0; j < kDimTiles; ++j) {
        o[j][2 * h] *= rescale;
        o[j][2 * h + 1] *= rescale;
      }
    }

    // P = exp2(S - max), rounded to bf16 into A operands; the row sums add
    // the rounded weights, so the normalisation matches what P·V used.
    std::uint32_t pf[kKeyTiles][2];  // per n-tile: (elements 0, 1), (elements 2, 3)
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::uint32_t w = pack_bf16(exp2f(s[j][2 * h] - ref[h]), exp2f(s[j][2 * h + 1] - ref[h]));
        row_sum[h] += bf16_lo(w) + bf16_hi(w);
        pf[j][h] = w;
      }
    }

    // O += P·V, 16 keys per step.
    {
      const mma::RowCol b = mma::ldsm_bt_address(lane);
#pragma unroll
      for (int st = 0; st < kKeys / 16; ++st) {
        std::uint32_t a[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          // Both halves of A register r come from one accumulator pair (p_operand's elem 2h, 2h + 1).
          const mma::AccIndex src = mma::p_operand(st, r, 0);
          a[r] = pf[src.ntile][src.elem / 2];
        }
#pragma unroll
        for (int j = 0; j < kDimTiles; j += 2) {
          std::uint32_t vf[4];
          ldmatrix_x4_trans(vf, v_s + (st * 16 + b.row) * L::kStride + j * 8 + b.col);
          mma_bf16(o[j], a, vf[0], vf[1]);
          mma_bf16(o[j + 1], a, vf[2], vf[3]);
        }
      }
    }
  }

  // Normalise and store the rows that exist.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int packed = t.packed_begin + warp * 16 + mma::acc_element(lane, 2 * h).row;
    if (packed >= total) continue;
    const float inv = 1.0f / sum;  // > 0: every row sees its own key
    const paged::PackedRow pr = paged::packed_row(packed, group);
    float* orow = p.out + static_cast<std::int64_t>(t.row + pr.query) * p.out_stride +
                  static_cast<std::int64_t>(kv_head * group + pr.head) * kDim;
#pragma unroll
    for (int j = 0; j < kDimTiles; ++j) {
      const int col = j * 8 + mma::acc_element(lane, 2 * h).col;
      orow[col] = o[j][2 * h] * inv;
      orow[col + 1] = o[j][2 * h + 1] * inv;
    }
  }
}

template <int kDim>
void launch_mma(const AttnParams& p, const AttnMmaTile* tiles, int num_tiles, int sliding_window,
                cudaStream_t stream) {
  constexpr std::size_t smem = Layout<kDim>::kBytes;
  if (smem > 48 * 1024) {
    cudaFuncSetAttribute(attention_mma_kernel<kDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  }
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>(p.kv_heads));
  attention_mma_kernel<kDim><<<grid, kThreads, smem, stream>>>(p, tiles, sliding_window);
}

}  // namespace

bool attention_mma_supported(int head_dim, int cache_dtype) {
  if (head_dim != 64 && head_dim != 128) return false;
  if (cache_dtype != kF32 && cache_dtype != kBf16 && cache_dtype != kF8E4M3) return false;
  int device = 0, major = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) return false;
  const std::size_t smem = head_dim == 64 ? Layout<64>::kBytes : Layout<128>::kBytes;
  return major >= 8 && smem <= static_cast<std::size_t>(optin);
}

bool attention_mma_disabled_by_env() {
  const char* v = std::getenv("TWIN_CUDA_ATTENTION");
  return v != nullptr && std::strcmp(v, "reference") == 0;
}

void launch_paged_attention_mma(const AttnParams& p, const AttnMmaTile* tiles, int num_tiles, int sliding_window,
                                cudaStream_t stream) {
  if (num_tiles == 0) return;
  if (p.head_dim == 64) {
    launch_mma<64>(p, tiles, num_tiles, sliding_window, stream);
  } else {
    launch_mma<128>(p, tiles, num_tiles, sliding_window, stream);
  }
}

}  // namespace twin::cuda
