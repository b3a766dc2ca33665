#pragma once
// Device memory planned like vLLM: the KV cache gets what is left of
// `utilization` x the device's memory after what is already in use (CUDA
// context, other processes), the weights, and the activation workspace.
// Plain arithmetic (no CUDA), so the CLI and the CPU tests use it too.
#include <algorithm>
#include <cstdint>
#include <string>

#include "base/error.hpp"

namespace twin {

// The device sampler (cuda_sampling.cu) sorts at most this many (probability,
// id) pairs at a time, 24 bytes each with the sort's double buffers: the
// workspace the memory plan sets aside for it.
constexpr std::int64_t kSamplingChunkPairs = std::int64_t{1} << 24;
constexpr std::int64_t kSamplingBytesPerPair = 24;

// Rows of `rows` sampled rows the device sampler sorts in one pass: as many
// whole rows as fit in a chunk, at least one.
inline std::int64_t sampling_chunk_rows(std::int64_t vocab, std::int64_t rows) {
  return std::min(rows, std::max<std::int64_t>(1, kSamplingChunkPairs / std::max<std::int64_t>(vocab, 1)));
}

// The sort space the plan sets aside for that chunk (doubled: the sampler's
// workspace grows by doubling).
inline std::int64_t sampling_workspace_bytes(std::int64_t vocab, std::int64_t rows) {
  return 2 * sampling_chunk_rows(vocab, rows) * vocab * kSamplingBytesPerPair;
}

struct KvMemoryPlan {
  std::int64_t budget_bytes = 0;     // utilization x total
  std::int64_t in_use_bytes = 0;     // total - free when planned
  std::int64_t weight_bytes = 0;
  std::int64_t workspace_bytes = 0;
  std::int64_t kv_bytes = 0;         // what is left for KV blocks
  std::int64_t num_blocks = 0;
};

// Throws UsageError for a utilization outside (0, 1], twin::Error (with every
// figure) when not one KV block fits.
inline KvMemoryPlan plan_kv_memory(std::int64_t total_bytes, std::int64_t free_bytes, double utilization,
                                   std::int64_t weight_bytes, std::int64_t workspace_bytes,
                                   std::int64_t block_bytes) {
  if (!(utilization > 0.0 && utilization <= 1.0)) {
    throw UsageError("--gpu-memory-utilization " + std::to_string(utilization) + " must be in (0, 1]");
  }
  if (block_bytes <= 0) throw Error("KV memory plan: block bytes must be positive");
  KvMemoryPlan p;
  p.budget_bytes = static_cast<std::int64_t>(static_cast<double>(total_bytes) * utilization);
  p.in_use_bytes = std::max<std::int64_t>(0, total_bytes - free_bytes);
  p.weight_bytes = weight_bytes;
  p.workspace_bytes = workspace_bytes;
  p.kv_bytes = p.budget_bytes - p.in_use_bytes - weight_bytes - workspace_bytes;
  p.num_blocks = p.kv_bytes > 0 ? p.kv_bytes / block_bytes : 0;
  if (p.num_blocks <= 0) {
    auto gib = [](std::int64_t b) { return std::to_string(static_cast<double>(b) / (1 << 30)).substr(0, 6) + " GiB"; };
    throw Error("KV memory plan: no KV block of " + std::to_string(block_bytes) + " bytes fits: " +
                std::to_string(utilization) + " x " + gib(total_bytes) + " = " + gib(p.budget_bytes) + ", minus " +
                gib(p.in_use_bytes) + " in use, " + gib(weight_bytes) + " of weights and " + gib(workspace_bytes) +
                " of activation workspace (raise --gpu-memory-utilization or lower max_num_batched_tokens)");
  }
  return p;
}

}  // namespace twin
