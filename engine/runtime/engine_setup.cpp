#include "engine/runtime/engine_setup.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/error.hpp"
#include "engine/core/scheduler_config.hpp"

namespace twin {

EngineSettings engine_settings(const EngineSetup& setup) {
  EngineSettings s;
  s.model = setup.model;
  s.runner = setup.runner;
  s.sampling = setup.sampling;
  s.speculative = setup.speculative;
  s.time_ops = setup.time_ops;
  s.max_model_len_auto = setup.max_model_len_auto;
  s.roles = setup.roles;
  s.disagg = setup.disagg;
  const ModelConfig model = engine_model_config(s);
  s.model_config = model;

  ReplicaOverrides overrides = setup.overrides;
  const std::int32_t context = static_cast<std::int32_t>(std::min<std::int64_t>(model.max_position_embeddings, 1 << 30));
  if (overrides.max_model_len && *overrides.max_model_len > context) {
    throw UsageError("--max-model-len " + std::to_string(*overrides.max_model_len) + " exceeds the context of model '" +
                     model.name + "' (" + std::to_string(context) + ")");
  }
  if (!overrides.max_model_len) overrides.max_model_len = context;
  // One route for a fixed block count: the replica's (the runner takes it
  // from there, Engine), whichever field the caller set.
  if (!overrides.num_gpu_blocks && s.runner.num_blocks > 0) overrides.num_gpu_blocks = s.runner.num_blocks;
  s.runner.num_blocks = 0;
  if (overrides.num_gpu_blocks && s.runner.kv_cache_memory_bytes > 0) {
    throw UsageError("--num-gpu-blocks-override and --kv-cache-memory-bytes contradict: give one");
  }
  if (s.runner.kv_cache_memory_bytes < 0) throw UsageError("--kv-cache-memory-bytes must be positive");
  constexpr std::int64_t kMaxSwapBytes = std::int64_t{1024} << 30;
  if (s.runner.swap_space_bytes < 0 || s.runner.swap_space_bytes > kMaxSwapBytes) {
    throw UsageError("--swap-space must be 0 to 1024 GiB");
  }
  if (s.sampling.eos_token >= 0) overrides.stop_at_eos = true;

  s.replica = replica_preset(setup.scheduler_preset);
  apply_overrides(s.replica, overrides);
  validate(s.replica.scheduler);  // the KV block counts are the engine's to settle
  return s;
}

}  // namespace twin
