#pragma once
// The GQA decode attention kernel's arithmetic (cuda_attention_decode.cu),
// shared with the host so the CPU tests run the same code: the thread
// geometry (which lanes read which key and which head dims), the split-K
// partition size, the online-softmax state each lane keeps and the merges
// of those states across lanes, warps and partitions. Plain C++ on scalars
// and fixed arrays, nothing CUDA-specific but the TWIN_HOST_DEVICE marks.
//
// Scores are kept in base 2: q is pre-multiplied by scale * log2(e), so
// exp(score - max) is exp2(s - m) with the same value up to rounding and the
// device's exp2 is a single fast instruction.
#include <cmath>
#include <cstdint>

#include "engine/backend/paged_index.hpp"

namespace twin::decode {

// Each lane owns 8 consecutive head dims of a key (16-byte loads of a bf16 /
// f16 cache, two of an f32 one), so a key's row of head_dim elements is read
// by lanes_per_key(head_dim) lanes of one warp in one go.
constexpr int kElemsPerLane = 8;
constexpr int kWarps = 4;                   // per block: 128 threads
constexpr int kThreads = kWarps * 32;
constexpr int kMaxHeadDim = 32 * kElemsPerLane;  // 256: one warp per key
constexpr int kMaxHeadsPerBlock = 8;        // register budget: q and acc are 2 x 8 x heads floats a lane
// Split-K partitions: at least this many keys (fewer make the merge cost more
// than it saves), in multiples of kPartitionQuantum.
constexpr std::int32_t kMinPartition = 256;
constexpr std::int32_t kPartitionQuantum = 64;
// Blocks a launch aims for per SM: two or more waves of resident blocks, so
// the tail of the last wave costs little.
constexpr std::int32_t kBlocksPerSm = 8;
// gridDim.z (the partitions) is at most 65535 on every CUDA device.
constexpr std::int32_t kMaxPartitions = 65535;

constexpr float kLog2e = 1.4426950408889634f;

// Keys a lane group reads per batch, all loads in flight before any use:
// 64 bytes of K and 64 of V a lane (4 keys of a 16-bit cache, 2 of f32).
TWIN_HOST_DEVICE constexpr int keys_per_batch(int elem_bytes) { return elem_bytes == 4 ? 2 : 4; }

TWIN_HOST_DEVICE inline float exp2_(float x) {
#if defined(__CUDA_ARCH__)
  return exp2f(x);
#else
  return std::exp2(x);
#endif
}

TWIN_HOST_DEVICE inline float max_(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}

// Whether the kernel handles this head size: whole 8-element lanes, one warp
// at most per key. (The cache pointers must also be 16-byte aligned; the
// launcher checks that.)
TWIN_HOST_DEVICE inline bool head_dim_supported(std::int32_t head_dim) {
  return head_dim > 0 && head_dim <= kMaxHeadDim && head_dim % kElemsPerLane == 0;
}

// Lanes reading one key: the power of two covering head_dim / 8 (1..32), so
// the lanes of a key are an aligned group of a warp and xor shuffles with
// offsets below it stay inside the group.
TWIN_HOST_DEVICE inline int lanes_per_key(std::int32_t head_dim) {
  int lanes = 1;
  while (lanes * kElemsPerLane < head_dim) lanes *= 2;
  return lanes;
}

TWIN_HOST_DEVICE inline int log2_int(int power_of_two) {
  int s = 0;
  while ((1 << s) < power_of_two) ++s;
  return s;
}

// Query heads one block computes: the GQA group (num_heads / kv_heads)
// rounded up to a power of two, at most 8; larger groups (MQA with many
// heads) take several blocks per KV head, each reading the KV again.
TWIN_HOST_DEVICE inline int heads_per_block(std::int32_t group) {
  int h = 1;
  while (h < group && h < kMaxHeadsPerBlock) h *= 2;
  return h;
}

TWIN_HOST_DEVICE inline int head_blocks(std::int32_t group, int per_block) { return (group + per_block - 1) / per_block; }

// Where a thread sits: its lane group (one key at a time) and the head dims
// it owns. Groups are numbered across the block: warp * groups_per_warp +
// lane / lanes_per_key.
struct LaneRole {
  int group;    // 0 .. groups - 1
  int groups;   // lane groups per block
  int sub;      // lane within the group
  int dim0;     // first head dim owned: sub * 8
  bool active;  // dim0 < head_dim (the group's spare lanes read nothing)
};

TWIN_HOST_DEVICE inline LaneRole lane_role(int thread, int lanes_log2, std::int32_t head_dim) {
  LaneRole r;
  const int lane = thread & 31, warp = thread >> 5;
  const int per_warp_log2 = 5 - lanes_log2;
  r.group = (warp << per_warp_log2) + (lane >> lanes_log2);
  r.groups = kWarps << per_warp_log2;
  r.sub = lane & ((1 << lanes_log2) - 1);
  r.dim0 = r.sub * kElemsPerLane;
  r.active = r.dim0 < head_dim;
  return r;
}

// The partition's key index (0-based within the partition) lane group
// `group` reads as key u of the batch starting at `base`: consecutive groups
// take consecutive keys, so a batch of keys_per_batch = unroll * groups keys
// is read by the whole block at once.
TWIN_HOST_DEVICE inline std::int32_t batch_key(std::int32_t base, int u, int groups, int group) {
  return base + u * groups + group;
}

// Keys per split-K partition for a launch of `units` (row, KV head, head
// block) triples whose longest row sees `max_keys` keys on `sms` SMs: split
// each row so that the launch has about kBlocksPerSm blocks per SM, but never
// below kMinPartition keys (a large batch is not split at all once it fills
// the GPU by itself) and never into more than kMaxPartitions partitions.
TWIN_HOST_DEVICE inline std::int32_t partition_size(std::int32_t max_keys, std::int64_t units, std::int32_t sms) {
  if (max_keys <= kMinPartition) return kMinPartition;
  const std::int64_t target = static_cast<std::int64_t>(sms > 0 ? sms : 1) * kBlocksPerSm;
  const std::int64_t u = units > 0 ? units : 1;
  const std::int64_t parts = (target + u - 1) / u;
  std::int64_t size = (max_keys + parts - 1) / parts;
  const std::int64_t floor_for_grid = (static_cast<std::int64_t>(max_keys) + kMaxPartitions - 1) / kMaxPartitions;
  if (size < floor_for_grid) size = floor_for_grid;
  size = (size + kPartitionQuantum - 1) / kPartitionQuantum * kPartitionQuantum;
  if (size < kMinPartition) size = kMinPartition;
  if (size > max_keys) size = max_keys;  // one partition: no merge
  return static_cast<std::int32_t>(size);
}

// A lane's part of a score: its 8 dims of q (pre-scaled) and k, in order.
TWIN_HOST_DEVICE inline float dot_lane(const float (&q)[kElemsPerLane], const float (&k)[kElemsPerLane]) {
  float d = 0.0f;
  for (int e = 0; e < kElemsPerLane; ++e) {
#if defined(__CUDA_ARCH__)
    d = fmaf(q[e], k[e], d);
#else
    d = std::fma(q[e], k[e], d);
#endif
  }
  return d;
}

// 0 when m is -inf (nothing seen: its acc and l are 0, and exp2(-inf - -inf)
// would be NaN), else exp2(m - m_new) with m_new >= m.
TWIN_HOST_DEVICE inline float rescale(float m, float m_new) { return m == -INFINITY ? 0.0f : exp2_(m - m_new); }

// A lane's running softmax over the keys its group has read, for `Heads`
// query heads and the lane's 8 head dims: max score m (base 2), sum of
// exp2(s - m) l, and the weighted sum of V rows acc (relative to m).
template <int Heads>
struct SoftmaxState {
  float m[Heads];
  float l[Heads];
  float acc[Heads][kElemsPerLane];

  TWIN_HOST_DEVICE void reset() {
    for (int h = 0; h < Heads; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.0f;
      for (int e = 0; e < kElemsPerLane; ++e) acc[h][e] = 0.0f;
    }
  }

  // Folds a batch of Keys keys: s[u][h] their base-2 scores (-inf: no key,
  // v[u] then all 0), v[u] the lane's dims of their V rows. One rescale of
  // the old state per batch, not per key.
  template <int Keys>
  TWIN_HOST_DEVICE void fold(const float (&s)[Keys][Heads], const float (&v)[Keys][kElemsPerLane]) {
    for (int h = 0; h < Heads; ++h) {
      float mx = m[h];
      for (int u = 0; u < Keys; ++u) mx = max_(mx, s[u][h]);
      if (mx == -INFINITY) continue;  // no key yet
      const float alpha = rescale(m[h], mx);
      float lsum = l[h] * alpha;
      float a[kElemsPerLane];
      for (int e = 0; e < kElemsPerLane; ++e) a[e] = acc[h][e] * alpha;
      for (int u = 0; u < Keys; ++u) {
        const float p = rescale(s[u][h], mx);
        lsum += p;
        for (int e = 0; e < kElemsPerLane; ++e) a[e] += p * v[u][e];
      }
      m[h] = mx;
      l[h] = lsum;
      for (int e = 0; e < kElemsPerLane; ++e) acc[h][e] = a[e];
    }
  }

  // Takes in another state of head h over disjoint keys (another lane
  // group's or warp's): both rescaled to the larger max.
  TWIN_HOST_DEVICE void merge(int h, float m2, float l2, const float (&acc2)[kElemsPerLane]) {
    const float mx = max_(m[h], m2);
    if (mx == -INFINITY) return;
    const float a = rescale(m[h], mx), b = rescale(m2, mx);
    l[h] = l[h] * a + l2 * b;
    for (int e = 0; e < kElemsPerLane; ++e) acc[h][e] = acc[h][e] * a + acc2[e] * b;
    m[h] = mx;
  }
};

// n partial states of one output element: maxes m[i * m_stride], sums
// l[i * l_stride], accumulators acc[i * acc_stride]. The merged (m, l, acc);
// the output is acc / l. Used across a block's warps and across split-K
// partitions, always in index order.
struct Merged {
  float m;
  float l;
  float acc;
};

TWIN_HOST_DEVICE inline Merged merge_parts(int n, const float* m, std::int64_t m_stride, const float* l,
                                           std::int64_t l_stride, const float* acc, std::int64_t acc_stride) {
  Merged r{-INFINITY, 0.0f, 0.0f};
  for (int i = 0; i < n; ++i) r.m = max_(r.m, m[i * m_stride]);
  if (r.m == -INFINITY) return r;
  for (int i = 0; i < n; ++i) {
    const float w = rescale(m[i * m_stride], r.m);
    r.l += l[i * l_stride] * w;
    r.acc += acc[i * acc_stride] * w;
  }
  return r;
}

// bf16 bits to f32 (exact): the bits are the top half of the float.
TWIN_HOST_DEVICE inline float bf16_to_f32(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}

}  // namespace twin::decode
