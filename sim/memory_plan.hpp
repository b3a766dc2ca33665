#pragma once
// How many KV blocks a replica gets, as vLLM decides it: what the GPU may use
// (memory x gpu_memory_utilization) minus the weights and the activation
// peak, divided by the bytes one block takes on one GPU. Under TP/PP every
// GPU holds its share of the weights and of each block; the fullest GPU
// decides.
#include <cstdint>
#include <string>

namespace twin {

struct MemoryPlanInput {
  double gpu_memory_bytes = 0;
  double gpu_memory_utilization = 0.9;
  double weight_bytes_per_gpu = 0;        // the fullest GPU's share
  double activation_reserve_bytes = 0;    // peak activations and workspace per GPU
  double kv_block_bytes_per_gpu = 0;      // one block's share on the fullest GPU
  std::int32_t num_gpu_blocks_override = 0;  // > 0: use this many, as vLLM's flag
};

struct MemoryPlan {
  double usable_bytes = 0;     // memory x utilization
  double weight_bytes = 0;
  double activation_bytes = 0;
  double kv_bytes = 0;         // left for the KV cache
  double block_bytes = 0;
  std::int32_t num_blocks = 0;
  bool overridden = false;
};

// The most KV blocks a simulated replica holds (2^26: a billion tokens at
// block size 16; the core's per-block state stays under ~3 GB).
constexpr std::int32_t kMaxSimulatedBlocks = std::int32_t{1} << 26;

// Throws Error when the model does not fit (not even one block) or needs
// more than kMaxSimulatedBlocks, giving the numbers; `what` names the model,
// hardware and layout in the message.
// Throws UsageError for a utilization outside (0, 1].
MemoryPlan plan_memory(const MemoryPlanInput& input, const std::string& what);

}  // namespace twin
