#include "sim/mixed_attention.hpp"

namespace twin {

namespace {
// FlashAttention-2's forward kernel over a paged KV cache (the split-KV
// kernel vLLM's varlen call takes): kBlockM is 64 for every head size.
constexpr std::int32_t kFlashAttention2TileRows = 64;
}  // namespace

std::int32_t mixed_attention_rows_for(const ReplicaConfig& replica, const HardwareDesc& hw) {
  if (replica.mixed_attention_rows >= 0) return replica.mixed_attention_rows;
  if (replica.scheduler.preset != "vllm") return 0;
  // vLLM's attention backend by device (vllm/platforms/cuda.py): FLASH_ATTN
  // with FlashAttention 2 on 8.x and 12.x; 9.0 takes FlashAttention 3
  // (another kernel, not measured here); 10.x FlashInfer (apart).
  const double cc = hw.compute_capability;
  const bool fa2 = (cc >= 8.0 && cc < 9.0) || (cc >= 12.0 && cc < 13.0);
  return fa2 ? kFlashAttention2TileRows : 0;
}

}  // namespace twin
