// Temperature / top-k / top-p sampling on the device, token for token what
// sample_reference picks on the host. Per row: the probabilities in double
// (sampling::prob, the host's expression), a stable segmented radix sort by
// probability descending (equal probabilities keep ascending ids, the
// reference's tie rule), then one thread per row walks the sorted row
// sequentially (sampling::Walk, the row staged through shared memory by its
// block) so every double sum rounds as on the host. The only difference
// left is exp's last ulp (the device's double exp is within 1 ulp, glibc's
// close to correctly rounded): a draw or a top-p cut that lands within that
// ulp of a boundary can differ, about 1e-16 per draw.
//
// Cost: a full 64-bit segmented radix sort of every sampled row (vocab pairs
// of 12 bytes, 8 passes), and up to three sequential passes of up to vocab
// dependent double adds per row (rows in parallel). Simple rather than
// fast; a pivot search for the top-k / top-p prefix that sorts only the
// candidates is left for later.
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>

#include "engine/backend/cuda/cuda_kernels.hpp"
#include "engine/backend/cuda/memory_plan.hpp"
#include "engine/backend/sampling_walk.hpp"

namespace twin::cuda {

namespace {

constexpr int kProbThreads = 256;
constexpr int kWalkThreads = 256;
constexpr int kWalkTile = 4096;  // doubles: 32 KiB of shared memory

constexpr std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Pairs sorted per pass: at most kSamplingChunkPairs, which bounds the
// workspace (12 bytes per pair, twice for the radix sort's double buffers:
// 384 MiB, which the memory plan sets aside) and keeps CUB's int counts safe.
std::int64_t chunk_rows(std::int64_t vocab, std::int64_t n) { return sampling_chunk_rows(vocab, n); }

// Where each part of the workspace sits, for a chunk of `rows` rows.
struct Workspace {
  double* keys[2];
  std::int32_t* ids[2];
  int* offsets;      // rows + 1 segment bounds
  float* row_max;    // the largest non-NaN logit of each row
  void* sort_temp;
  std::size_t sort_temp_bytes;
  std::size_t total;
};

cudaError_t sort_temp_bytes(std::int64_t vocab, std::int64_t rows, std::size_t& bytes) {
  cub::DoubleBuffer<double> keys(nullptr, nullptr);
  cub::DoubleBuffer<std::int32_t> ids(nullptr, nullptr);
  const int* offsets = nullptr;
  bytes = 0;
  return cub::DeviceSegmentedRadixSort::SortPairsDescending(nullptr, bytes, keys, ids, static_cast<int>(rows * vocab),
                                                            static_cast<int>(rows), offsets, offsets + 1);
}

cudaError_t layout(std::int64_t vocab, std::int64_t rows, char* base, Workspace& w) {
  const std::size_t elems = static_cast<std::size_t>(rows * vocab);
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    char* p = base == nullptr ? nullptr : base + at;
    at += align_up(bytes);
    return p;
  };
  for (int b = 0; b < 2; ++b) w.keys[b] = reinterpret_cast<double*>(take(elems * sizeof(double)));
  for (int b = 0; b < 2; ++b) w.ids[b] = reinterpret_cast<std::int32_t*>(take(elems * sizeof(std::int32_t)));
  w.offsets = reinterpret_cast<int*>(take(static_cast<std::size_t>(rows + 1) * sizeof(int)));
  w.row_max = reinterpret_cast<float*>(take(static_cast<std::size_t>(rows) * sizeof(float)));
  const cudaError_t err = sort_temp_bytes(vocab, rows, w.sort_temp_bytes);
  if (err != cudaSuccess) return err;
  w.sort_temp = take(w.sort_temp_bytes);
  w.total = at;
  return cudaSuccess;
}

// A block per row: the row's max over non-NaN logits (fmaxf drops NaN), then
// (probability, id) pairs and the segment bounds for the sort.
__global__ void sample_probs_kernel(const float* logits, std::int64_t stride, std::int64_t vocab,
                                    const SampleRow* rows, double* keys, std::int32_t* ids, int* offsets,
                                    float* row_max) {
  __shared__ float part[kProbThreads];
  const SampleRow row = rows[blockIdx.x];
  const float* x = logits + static_cast<std::int64_t>(row.row) * stride;
  float m = -INFINITY;
  for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) m = fmaxf(m, x[i]);
  part[threadIdx.x] = m;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  const float max_logit = part[0];
  const double inv_t = 1.0 / static_cast<double>(row.temperature);
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * vocab;
  for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    keys[base + i] = sampling::prob(x[i], max_logit, inv_t);
    ids[base + i] = static_cast<std::int32_t>(i);
  }
  if (threadIdx.x == 0) {
    row_max[blockIdx.x] = max_logit;
    offsets[blockIdx.x] = static_cast<int>(base);
    if (blockIdx.x == gridDim.x - 1) offsets[gridDim.x] = static_cast<int>(base + vocab);
  }
}

// A block per row: the block stages the sorted row through shared memory,
// a tile at a time, and thread 0 feeds it to the walk, whose sums must run
// sequentially to round as the host's. Reading global memory from thread 0
// alone would wait on every load instead.
__global__ void sample_walk_kernel(const double* keys, const std::int32_t* ids, std::int64_t vocab,
                                   const SampleRow* rows, const float* row_max, std::int32_t* out) {
  __shared__ double tile[kWalkTile];
  __shared__ std::int64_t tile_start;
  __shared__ bool walk_done;
  const std::int64_t r = blockIdx.x;
  if (!sampling::has_max(row_max[r])) {  // the same for the whole block
    if (threadIdx.x == 0) out[r] = 0;    // every logit NaN or -inf: the greedy argmax, id 0
    return;
  }
  const SampleRow row = rows[r];
  const double* p = keys + r * vocab;
  sampling::Walk walk(vocab, row.top_k, row.top_p, row.u);  // only thread 0's copy advances
  for (;;) {
    if (threadIdx.x == 0) {
      walk_done = walk.done();
      tile_start = walk.next();
    }
    __syncthreads();
    if (walk_done) break;
    const std::int64_t start = tile_start;
    const std::int64_t len = vocab - start < kWalkTile ? vocab - start : kWalkTile;
    for (std::int64_t j = threadIdx.x; j < len; j += blockDim.x) tile[j] = p[start + j];
    __syncthreads();
    if (threadIdx.x == 0) {
      while (!walk.done() && walk.next() >= start && walk.next() < start + len) {
        walk.feed(tile + (walk.next() - start), start + len - walk.next());
      }
    }
    __syncthreads();  // the tile and tile_start are rewritten next round
  }
  if (threadIdx.x == 0) out[r] = ids[r * vocab + walk.result()];
}

}  // namespace

std::size_t sample_rows_workspace(std::int64_t vocab, std::int64_t n) {
  if (n <= 0 || vocab <= 0) return 0;
  Workspace w{};
  if (layout(vocab, chunk_rows(vocab, n), nullptr, w) != cudaSuccess) return 0;
  return w.total;
}

cudaError_t launch_sample_rows(const float* logits, std::int64_t stride, std::int64_t vocab, const SampleRow* rows,
                               std::int64_t n, void* workspace, std::size_t workspace_bytes, std::int32_t* out,
                               cudaStream_t stream) {
  if (n <= 0 || vocab <= 0) return cudaSuccess;
  const std::int64_t per_chunk = chunk_rows(vocab, n);
  Workspace w{};
  cudaError_t err = layout(vocab, per_chunk, static_cast<char*>(workspace), w);
  if (err != cudaSuccess) return err;
  if (w.total > workspace_bytes) return cudaErrorInvalidValue;
  for (std::int64_t first = 0; first < n; first += per_chunk) {
    const std::int64_t count = std::min(per_chunk, n - first);
    sample_probs_kernel<<<static_cast<unsigned>(count), kProbThreads, 0, stream>>>(
        logits, stride, vocab, rows + first, w.keys[0], w.ids[0], w.offsets, w.row_max);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    cub::DoubleBuffer<double> keys(w.keys[0], w.keys[1]);
    cub::DoubleBuffer<std::int32_t> ids(w.ids[0], w.ids[1]);
    std::size_t temp_bytes = w.sort_temp_bytes;
    const int* offsets = w.offsets;  // the type sort_temp_bytes asked CUB about
    err = cub::DeviceSegmentedRadixSort::SortPairsDescending(w.sort_temp, temp_bytes, keys, ids,
                                                             static_cast<int>(count * vocab), static_cast<int>(count),
                                                             offsets, offsets + 1, 0, 64, stream);
    if (err != cudaSuccess) return err;
    sample_walk_kernel<<<static_cast<unsigned>(count), kWalkThreads, 0, stream>>>(
        keys.Current(), ids.Current(), vocab, rows + first, w.row_max, out + first);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace twin::cuda
