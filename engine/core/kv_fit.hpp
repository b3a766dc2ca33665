#pragma once
// vLLM's start-up check on the KV cache: the cache must hold at least one
// request of max_model_len tokens, or vLLM refuses to start
// (vllm/v1/core/kv_cache_utils.py, _check_enough_kv_cache_memory). The
// memory one request needs is ceil(max_model_len / block_size) blocks (a
// full-attention layer's max_memory_usage_bytes); the largest max_model_len
// that fits is found, as vLLM does, by binary search on that need, which is
// also what `--max-model-len auto` (vLLM's -1) lowers max_model_len to.
// Pure arithmetic: the simulator's memory plan and the engine's both use it.
#include <cstdint>
#include <string>

namespace twin {

struct KvFit {
  std::int32_t max_model_len = 0;      // the length checked
  std::int32_t block_size = 0;         // tokens per block
  double block_bytes = 0;              // one block (per GPU)
  double needed_bytes = 0;             // KV one request of that length needs (per GPU)
  double available_bytes = 0;          // KV memory the plan left (per GPU)
  std::int32_t largest_fitting = 0;    // the largest max_model_len that fits, at most max_model_len; 0: none
  bool fits() const { return needed_bytes <= available_bytes && available_bytes > 0; }
};

// KV bytes one request of `tokens` tokens needs: whole blocks.
double kv_bytes_for_tokens(std::int64_t tokens, std::int32_t block_size, double block_bytes);

// The check for one worker: `available_bytes` of KV memory (what the memory
// plan left, before any block-count override, as vLLM checks it), blocks of
// `block_size` tokens taking `block_bytes` each. Throws UsageError for a
// block size or block bytes that are not positive or a max_model_len < 1.
KvFit check_kv_fit(double available_bytes, double block_bytes, std::int32_t block_size, std::int32_t max_model_len);

// vLLM's refusal, in its words and figures: "To serve at least one request
// with the models's max seq len (N), (X GiB KV cache is needed, which is
// larger than the available KV cache memory (Y GiB). Based on the available
// memory, the estimated maximum model length is Z. Try increasing
// `gpu_memory_utilization` or decreasing `max_model_len` ..."
std::string kv_fit_refusal(const KvFit& fit);

// One line for --explain-memory: the check's figures and verdict.
std::string kv_fit_verdict(const KvFit& fit);

}  // namespace twin
