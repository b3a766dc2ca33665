#include "sim/mixed_attention.hpp"

#include "sim/engine_traits.hpp"

namespace twin {

std::int32_t mixed_attention_rows_for(const ReplicaConfig& replica, const HardwareDesc& hw) {
  if (replica.mixed_attention_rows >= 0) return replica.mixed_attention_rows;
  const EngineTraits* engine = engine_traits(replica.scheduler.preset);
  if (!engine || engine->mixed_attention_tile_rows == 0) return 0;
  // vLLM's attention backend by device (vllm/platforms/cuda.py): FLASH_ATTN
  // with FlashAttention 2 on 8.x and 12.x; 9.0 takes FlashAttention 3
  // (another kernel, not measured here); 10.x FlashInfer (two calls).
  const double cc = hw.compute_capability;
  const bool fa2 = (cc >= 8.0 && cc < 9.0) || (cc >= 12.0 && cc < 13.0);
  return fa2 ? engine->mixed_attention_tile_rows : 0;
}

}  // namespace twin
