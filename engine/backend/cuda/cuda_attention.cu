// Paged attention on the device: one kernel for prefill chunks and decodes.
// Work unit: (query row, query head, key partition) = grid (x, y, z). A block of 128 threads
// takes one partition of up to kAttnPartitionSize keys: each warp scores one
// key at a time (lanes split head_dim, shuffle reduction), the scores sit in
// shared memory, the block takes their max and sum of exponentials, then
// each thread accumulates the output dims it owns over the partition's V
// rows. With one partition the block writes the normalised output; with more
// it writes (acc, max, sum) and a second kernel merges the partitions with
// the usual rescaling. The index arithmetic is engine/backend/paged_index.hpp,
// shared with the host and tested on the CPU.
//
// This kernel takes decodes and chunks of under kAttnTileMinRows new tokens;
// longer prefill chunks go to the tiled kernel (cuda_attention_tiled.cu),
// which reads each K/V row once per 16 query rows instead of once per row.
#include "engine/backend/cuda/cuda_device_util.cuh"
#include "engine/backend/paged_index.hpp"

namespace twin::cuda {

namespace {

constexpr int kAttnThreads = 128;

__global__ void attention_partition_kernel(AttnParams p) {
  extern __shared__ float smem[];
  float* q_s = smem;                    // head_dim
  float* scores = smem + p.head_dim;    // partition_size
  __shared__ float scratch[32];

  const int item = blockIdx.x, head = blockIdx.y, partition = blockIdx.z;  // rows in x: up to 2^31 - 1
  const AttnRow r = p.rows[item];
  const std::int32_t count = r.position - r.first_key + 1;
  const paged::KeyRange keys = paged::partition_range(r.first_key, count, p.partition_size, partition);
  if (keys.begin >= keys.end) return;  // this row has fewer partitions than the grid
  const int n = keys.end - keys.begin;
  const int hd = p.head_dim;
  const int kv_head = head / (p.num_heads / p.kv_heads);
  const std::int32_t* table = p.tables + r.table_offset;

  const float* qrow = p.q + static_cast<std::int64_t>(r.row) * p.q_stride + static_cast<std::int64_t>(head) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) q_s[d] = qrow[d];
  __syncthreads();

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int j = warp; j < n; j += warps) {
    const std::int64_t slot = paged::slot_of(table, p.block_size, keys.begin + j);
    const std::int64_t base = paged::kv_offset(slot, p.kv_heads, hd, kv_head);
    float dot = 0.0f;
    for (int d = lane; d < hd; d += 32) dot += q_s[d] * (load_elem(p.k_cache, p.cache_dtype, base + d) * p.k_scale);
    dot = warp_sum(dot);
    if (lane == 0) scores[j] = dot * p.scale;
  }
  __syncthreads();

  float m = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, scores[j]);
  m = block_max(m, scratch);
  float l = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(scores[j] - m);
    scores[j] = e;
    l += e;
  }
  l = block_sum(l, scratch);  // its barriers also publish the exponentials

  const std::int64_t out_base = (static_cast<std::int64_t>(item) * p.num_heads + head) * p.max_partitions + partition;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) {
      const std::int64_t slot = paged::slot_of(table, p.block_size, keys.begin + j);
      acc += scores[j] * (load_elem(p.v_cache, p.cache_dtype, paged::kv_offset(slot, p.kv_heads, hd, kv_head) + d) * p.v_scale);
    }
    if (p.max_partitions == 1) {
      p.out[static_cast<std::int64_t>(r.row) * p.out_stride + static_cast<std::int64_t>(head) * hd + d] = acc / l;
    } else {
      p.part_acc[out_base * hd + d] = acc;
    }
  }
  if (p.max_partitions > 1 && threadIdx.x == 0) {
    p.part_ml[out_base * 2] = m;
    p.part_ml[out_base * 2 + 1] = l;
  }
}

// Merges a row's partitions: out = sum_p acc_p e^(m_p - M) / sum_p l_p e^(m_p - M).
__global__ void attention_reduce_kernel(AttnParams p) {
  const int item = blockIdx.x, head = blockIdx.y;
  const AttnRow r = p.rows[item];
  const int parts = paged::num_partitions(r.position - r.first_key + 1, p.partition_size);
  const std::int64_t base = (static_cast<std::int64_t>(item) * p.num_heads + head) * p.max_partitions;
  float m = -INFINITY;
  for (int i = 0; i < parts; ++i) m = fmaxf(m, p.part_ml[(base + i) * 2]);
  float l = 0.0f;
  for (int i = 0; i < parts; ++i) l += p.part_ml[(base + i) * 2 + 1] * expf(p.part_ml[(base + i) * 2] - m);
  const int hd = p.head_dim;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < parts; ++i) acc += p.part_acc[(base + i) * hd + d] * expf(p.part_ml[(base + i) * 2] - m);
    p.out[static_cast<std::int64_t>(r.row) * p.out_stride + static_cast<std::int64_t>(head) * hd + d] = acc / l;
  }
}

}  // namespace

void launch_paged_attention(const AttnParams& p, cudaStream_t stream) {
  if (p.num_rows == 0 || p.max_partitions == 0) return;
  const dim3 grid(static_cast<unsigned>(p.num_rows), static_cast<unsigned>(p.num_heads),
                  static_cast<unsigned>(p.max_partitions));
  const std::size_t smem = sizeof(float) * static_cast<std::size_t>(p.head_dim + p.partition_size);
  attention_partition_kernel<<<grid, kAttnThreads, smem, stream>>>(p);
  if (p.max_partitions > 1) {
    attention_reduce_kernel<<<dim3(static_cast<unsigned>(p.num_rows), static_cast<unsigned>(p.num_heads)),
                              kAttnThreads, 0, stream>>>(p);
  }
}

}  // namespace twin::cuda
