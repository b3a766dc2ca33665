#pragma once
// How many KV blocks a replica gets, as vLLM decides it: what the GPU may use
// (memory as the device reports it x gpu_memory_utilization) minus the
// weights, the activation peak of a profile run at the token budget, the
// memory outside PyTorch (CUDA context and workspaces, collective buffers)
// and any CUDA graph pool counted inside the budget, divided by the bytes one
// block takes on one GPU. Under TP/PP every GPU holds its share of the
// weights and of each block; the fullest GPU decides.
#include <cstdint>
#include <string>

#include "engine/core/kv_fit.hpp"

namespace twin {

struct MemoryPlanInput {
  double gpu_memory_bytes = 0;            // as the device reports it
  double gpu_memory_utilization = 0.9;
  double weight_bytes_per_gpu = 0;        // the fullest GPU's share
  double activation_reserve_bytes = 0;    // peak of the profile run per GPU
  double runtime_reserve_bytes = 0;       // CUDA context, library workspaces
  double collective_reserve_bytes = 0;    // NCCL / custom all-reduce buffers (0 alone)
  double cuda_graph_reserve_bytes = 0;    // graph pool counted inside the budget
  double kv_block_bytes_per_gpu = 0;      // one block's share on the fullest GPU
  std::int32_t num_gpu_blocks_override = 0;  // > 0: use this many, as vLLM's flag
  // Attention ranks of the replica (EP: ep; else 1): each holds the KV of
  // its own sequences, so the replica has this many GPUs' worth of blocks.
  std::int32_t attention_ranks = 1;
  // Hybrid models (linear attention, Mamba-2): the fixed state one request
  // holds on the fullest GPU, for `state_seqs` requests (max_num_seqs: the
  // most that run at once, each holding its state whatever its length, as
  // vLLM's hybrid allocator gives each running request its state blocks),
  // set aside before the KV blocks are counted. 0: none.
  double state_bytes_per_seq_per_gpu = 0;
  std::int32_t state_seqs = 0;
};

struct MemoryPlan {
  double device_bytes = 0;     // as the device reports it
  double utilization = 0;
  double usable_bytes = 0;     // memory x utilization
  double weight_bytes = 0;
  double activation_bytes = 0;
  double runtime_bytes = 0;
  double collective_bytes = 0;
  double cuda_graph_bytes = 0;
  double state_bytes = 0;      // hybrid models: state_seqs requests' fixed state
  std::int32_t state_seqs = 0;
  double kv_bytes = 0;         // left for the KV cache
  double block_bytes = 0;
  std::int32_t num_blocks = 0;  // the replica's: per GPU x attention ranks
  std::int32_t attention_ranks = 1;
  bool overridden = false;
  // vLLM's start-up check (engine/core/kv_fit.hpp) on the fullest GPU, at
  // the replica's max_model_len; max_model_len 0: not checked.
  KvFit fit;
  // --max-model-len auto lowered max_model_len from this (the model's
  // context) to fit.largest_fitting; 0: not lowered.
  std::int32_t auto_fitted_from = 0;
};

// The most KV blocks a simulated replica holds (2^26: a billion tokens at
// block size 16). The core's block pool grows with the blocks a run uses
// (engine/core/block_pool.hpp), so a big pool costs nothing until filled;
// the cap keeps token counts (blocks x block size) inside 32 bits.
constexpr std::int32_t kMaxSimulatedBlocks = std::int32_t{1} << 26;

// Throws Error when the model does not fit (not even one block) or needs
// more than kMaxSimulatedBlocks, giving the numbers; `what` names the model,
// hardware and layout in the message.
// Throws UsageError for a utilization outside (0, 1].
MemoryPlan plan_memory(const MemoryPlanInput& input, const std::string& what);

// The plan term by term, one line each with GiB and bytes, as
// `simulate --explain-memory` prints it, then the start-up check's verdict.
// `indent` starts every line.
std::string explain_memory_plan(const MemoryPlan& plan, const std::string& indent);

}  // namespace twin
