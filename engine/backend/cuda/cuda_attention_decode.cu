// Paged decode attention, one block per (query row, KV head, key partition)
// for all the query heads of that GQA group (up to 8; larger groups take
// several head blocks), so each K/V row is read from memory once per KV head
// and not once per query head. Split-K: the partition size is chosen by the
// host from the SM count and the batch (decode::partition_size), and a
// second kernel merges the partitions when a row has more than one.
//
// Inside a block (128 threads) a key's K and V rows (head_dim elements,
// contiguous in the [blocks, block_size, kv_heads, head_dim] cache) are read
// by a group of lanes_per_key lanes with 16-byte loads, 8 elements a lane;
// a warp holds 32 / lanes_per_key such groups. Every group takes a batch of
// kUnroll keys at once (all their loads in flight before any use), scores
// them for each head (per-lane dot, xor-shuffle sum inside the group) and
// folds them into its lane's online softmax (running max, sum, V
// accumulator, base-2 exponents). Groups are merged with shuffles inside a
// warp, warps through shared memory, in a fixed order. All of that
// arithmetic is decode_attention.hpp, shared with the CPU tests, which
// replay this kernel's thread mapping on the host.
//
// Checked by the host emulation (tests/backend_cuda/test_decode_attention.cpp)
// and the CUDA-vs-CPU tests, which passed on an H200 (2026-12-04).
#include "engine/backend/cuda/cuda_attention_decode.hpp"
#include "engine/backend/cuda/cuda_device_util.cuh"
#include "engine/backend/cuda/decode_attention.hpp"
#include "engine/backend/paged_index.hpp"

namespace twin::cuda {

namespace {

using decode::kElemsPerLane;
using decode::kWarps;

// 16-byte words holding a lane's 8 elements: two for f32, one for bf16/f16;
// fp8's 8 bytes take the first half of one (an 8-byte load).
template <int Dtype>
constexpr int kWords = Dtype == kF32 ? 2 : 1;

template <int Dtype>
constexpr int kUnroll = decode::keys_per_batch(Dtype == kF32 ? 4 : 2);

template <int Dtype>
__device__ __forceinline__ void load_lane(const void* cache, std::int64_t elem, uint4 (&w)[kWords<Dtype>]) {
  if constexpr (Dtype == kF8E4M3) {
    const uint2 x = __ldg(reinterpret_cast<const uint2*>(static_cast<const char*>(cache) + elem));
    w[0] = make_uint4(x.x, x.y, 0u, 0u);
  } else {
    constexpr int bytes = Dtype == kF32 ? 4 : 2;
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const char*>(cache) + elem * bytes);
#pragma unroll
    for (int i = 0; i < kWords<Dtype>; ++i) w[i] = __ldg(src + i);
  }
}

// The lane's elements as f32; an fp8 cache's times its scale.
template <int Dtype>
__device__ __forceinline__ void to_float(const uint4 (&w)[kWords<Dtype>], float (&f)[kElemsPerLane], float scale) {
  (void)scale;  // read by the fp8 branch only
  if constexpr (Dtype == kF8E4M3) {
    const std::uint32_t u[2] = {w[0].x, w[0].y};
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = fp8_to_f32(static_cast<std::uint8_t>(u[i / 4] >> (8 * (i % 4)))) * scale;
  } else if constexpr (Dtype == kF32) {
    f[0] = __uint_as_float(w[0].x), f[1] = __uint_as_float(w[0].y), f[2] = __uint_as_float(w[0].z),
    f[3] = __uint_as_float(w[0].w);
    f[4] = __uint_as_float(w[1].x), f[5] = __uint_as_float(w[1].y), f[6] = __uint_as_float(w[1].z),
    f[7] = __uint_as_float(w[1].w);
  } else {
    const std::uint32_t u[4] = {w[0].x, w[0].y, w[0].z, w[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (Dtype == kBf16) {
        f[2 * i] = __uint_as_float(u[i] << 16);  // little-endian: the lower element in the low half
        f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
      } else {
        f[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(u[i] & 0xffffu)));
        f[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(u[i] >> 16)));
      }
    }
  }
}

template <int Dtype, int Heads>
__global__ void __launch_bounds__(decode::kThreads, Heads <= 4 ? 4 : 2) attention_decode_kernel(AttnParams p, int lanes_log2,
                                                                             int head_blocks) {
  constexpr int U = kUnroll<Dtype>;
  constexpr int W = kWords<Dtype>;
  extern __shared__ float smem[];  // m [kWarps][Heads], l [kWarps][Heads], acc [kWarps][Heads][head_dim]

  const int item = blockIdx.x, partition = blockIdx.z;
  const int kv_head = blockIdx.y / head_blocks, hblock = blockIdx.y % head_blocks;
  const AttnRow r = p.rows[item];
  const paged::KeyRange keys =
      paged::partition_range(r.first_key, r.position - r.first_key + 1, p.partition_size, partition);
  if (keys.begin >= keys.end) return;  // this row has fewer partitions than the grid
  const int n = keys.end - keys.begin;
  const int hd = p.head_dim;
  const int group_size = p.num_heads / p.kv_heads;
  const int head0 = kv_head * group_size + hblock * Heads;
  const int nh = min(Heads, group_size - hblock * Heads);
  const decode::LaneRole role = decode::lane_role(static_cast<int>(threadIdx.x), lanes_log2, hd);

  // The lane's dims of each head's query, pre-scaled to base-2 scores.
  const float qscale = p.scale * decode::kLog2e;
  const float* qrow = p.q + static_cast<std::int64_t>(r.row) * p.q_stride + static_cast<std::int64_t>(head0) * hd + role.dim0;
  float q[Heads][kElemsPerLane];
#pragma unroll
  for (int h = 0; h < Heads; ++h) {
#pragma unroll
    for (int e = 0; e < kElemsPerLane; ++e) q[h][e] = h < nh && role.active ? qrow[h * hd + e] * qscale : 0.0f;
  }

  const std::int64_t width = static_cast<std::int64_t>(p.kv_heads) * hd;
  const std::int64_t head_off = static_cast<std::int64_t>(kv_head) * hd + role.dim0;
  const std::int32_t* table = p.tables + r.table_offset;
  decode::SoftmaxState<Heads> st;
  st.reset();
  const int per_batch = U * role.groups;
  for (int base = 0; base < n; base += per_batch) {  // uniform over the block: every lane shuffles
    uint4 kw[U][W], vw[U][W];
    bool has[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = decode::batch_key(base, u, role.groups, role.group);
      has[u] = j < n;
      if (has[u] && role.active) {
        const std::int64_t elem = paged::slot_of(table, p.block_size, keys.begin + j) * width + head_off;
        load_lane<Dtype>(p.k_cache, elem, kw[u]);
        load_lane<Dtype>(p.v_cache, elem, vw[u]);
      } else {
#pragma unroll
        for (int i = 0; i < W; ++i) kw[u][i] = vw[u][i] = make_uint4(0u, 0u, 0u, 0u);
      }
    }
    float s[U][Heads];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[kElemsPerLane];
      to_float<Dtype>(kw[u], kf, p.k_scale);
#pragma unroll
      for (int h = 0; h < Heads; ++h) s[u][h] = decode::dot_lane(q[h], kf);
    }
    // Sum over the key's lanes: xor offsets below lanes_per_key stay in the group.
    for (int o = (1 << lanes_log2) >> 1; o > 0; o >>= 1) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int h = 0; h < Heads; ++h) s[u][h] += __shfl_xor_sync(0xffffffffu, s[u][h], o);
      }
    }
    float v[U][kElemsPerLane];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      to_float<Dtype>(vw[u], v[u], p.v_scale);
#pragma unroll
      for (int h = 0; h < Heads; ++h) s[u][h] = has[u] ? s[u][h] : -INFINITY;
    }
    st.template fold<U>(s, v);
  }

  // The warp's groups into one state (lanes with the same sub end up equal).
  for (int o = 1 << lanes_log2; o < 32; o <<= 1) {
#pragma unroll
    for (int h = 0; h < Heads; ++h) {
      const float m2 = __shfl_xor_sync(0xffffffffu, st.m[h], o), l2 = __shfl_xor_sync(0xffffffffu, st.l[h], o);
      float a2[kElemsPerLane];
#pragma unroll
      for (int e = 0; e < kElemsPerLane; ++e) a2[e] = __shfl_xor_sync(0xffffffffu, st.acc[h][e], o);
      st.merge(h, m2, l2, a2);
    }
  }

  // The warps through shared memory, then one thread per output element.
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  float* sm_m = smem;
  float* sm_l = smem + kWarps * Heads;
  float* sm_acc = smem + 2 * kWarps * Heads;
  if (lane < (1 << lanes_log2) && role.active) {
#pragma unroll
    for (int h = 0; h < Heads; ++h) {
#pragma unroll
      for (int e = 0; e < kElemsPerLane; ++e) sm_acc[(warp * Heads + h) * hd + role.dim0 + e] = st.acc[h][e];
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int h = 0; h < Heads; ++h) {
      sm_m[warp * Heads + h] = st.m[h];
      sm_l[warp * Heads + h] = st.l[h];
    }
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < nh * hd; idx += decode::kThreads) {
    const int h = idx / hd, d = idx - h * hd;
    const decode::Merged mg = decode::merge_parts(kWarps, sm_m + h, Heads, sm_l + h, Heads, sm_acc + h * hd + d, Heads * hd);
    const int head = head0 + h;
    if (p.max_partitions == 1) {
      p.out[static_cast<std::int64_t>(r.row) * p.out_stride + static_cast<std::int64_t>(head) * hd + d] = mg.acc / mg.l;
    } else {
      const std::int64_t slot = (static_cast<std::int64_t>(item) * p.num_heads + head) * p.max_partitions + partition;
      p.part_acc[slot * hd + d] = mg.acc;
      if (d == 0) {
        p.part_ml[slot * 2] = mg.m;
        p.part_ml[slot * 2 + 1] = mg.l;
      }
    }
  }
}

// Merges a row's partitions per (row, head), one thread per head dim, in
// partition order (base-2 maxes, as the partition kernel wrote them).
__global__ void __launch_bounds__(128) attention_decode_reduce_kernel(AttnParams p) {
  const int item = blockIdx.x, head = blockIdx.y;
  const AttnRow r = p.rows[item];
  const int parts = paged::num_partitions(r.position - r.first_key + 1, p.partition_size);
  const std::int64_t base = (static_cast<std::int64_t>(item) * p.num_heads + head) * p.max_partitions;
  const int hd = p.head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < hd; d += blockDim.x) {
    const decode::Merged mg =
        decode::merge_parts(parts, p.part_ml + base * 2, 2, p.part_ml + base * 2 + 1, 2, p.part_acc + base * hd + d, hd);
    p.out[static_cast<std::int64_t>(r.row) * p.out_stride + static_cast<std::int64_t>(head) * hd + d] = mg.acc / mg.l;
  }
}

template <int Dtype, int Heads>
void launch_decode(const AttnParams& p, dim3 grid, std::size_t smem, int lanes_log2, int head_blocks,
                   cudaStream_t stream) {
  attention_decode_kernel<Dtype, Heads><<<grid, decode::kThreads, smem, stream>>>(p, lanes_log2, head_blocks);
}

template <int Dtype>
void launch_decode_heads(const AttnParams& p, int heads, dim3 grid, std::size_t smem, int lanes_log2,
                         int head_blocks, cudaStream_t stream) {
  switch (heads) {
    case 1: launch_decode<Dtype, 1>(p, grid, smem, lanes_log2, head_blocks, stream); break;
    case 2: launch_decode<Dtype, 2>(p, grid, smem, lanes_log2, head_blocks, stream); break;
    case 4: launch_decode<Dtype, 4>(p, grid, smem, lanes_log2, head_blocks, stream); break;
    default: launch_decode<Dtype, 8>(p, grid, smem, lanes_log2, head_blocks, stream); break;
  }
}

}  // namespace

bool attention_decode_supported(int head_dim, const void* k_cache, const void* v_cache) {
  const auto aligned = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  return decode::head_dim_supported(head_dim) && aligned(k_cache) && aligned(v_cache);
}

int attention_decode_units_per_row(int num_heads, int kv_heads) {
  const int group = num_heads / kv_heads;
  return kv_heads * decode::head_blocks(group, decode::heads_per_block(group));
}

void launch_paged_attention_decode(const AttnParams& p, cudaStream_t stream) {
  if (p.num_rows == 0 || p.max_partitions == 0) return;
  const int group = p.num_heads / p.kv_heads;
  const int heads = decode::heads_per_block(group);
  const int head_blocks = decode::head_blocks(group, heads);
  const int lanes_log2 = decode::log2_int(decode::lanes_per_key(p.head_dim));
  const dim3 grid(static_cast<unsigned>(p.num_rows), static_cast<unsigned>(p.kv_heads * head_blocks),
                  static_cast<unsigned>(p.max_partitions));
  const std::size_t smem = sizeof(float) * static_cast<std::size_t>(kWarps * heads * (p.head_dim + 2));
  if (p.cache_dtype == kBf16) {
    launch_decode_heads<kBf16>(p, heads, grid, smem, lanes_log2, head_blocks, stream);
  } else if (p.cache_dtype == kF8E4M3) {
    launch_decode_heads<kF8E4M3>(p, heads, grid, smem, lanes_log2, head_blocks, stream);
  } else if (p.cache_dtype == kF16) {
    launch_decode_heads<kF16>(p, heads, grid, smem, lanes_log2, head_blocks, stream);
  } else {
    launch_decode_heads<kF32>(p, heads, grid, smem, lanes_log2, head_blocks, stream);
  }
  if (p.max_partitions > 1) {
    attention_decode_reduce_kernel<<<dim3(static_cast<unsigned>(p.num_rows), static_cast<unsigned>(p.num_heads)), 128,
                                     0, stream>>>(p);
  }
}

}  // namespace twin::cuda
