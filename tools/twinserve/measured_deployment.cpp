#include "tools/twinserve/measured_deployment.hpp"

#include <CLI/CLI.hpp>

namespace twin::cli {

void apply_deployment_flags(ClusterConfig& c, const EngineFlags& engine, const SchedulerFlags& sched,
                            const EngineMemoryFlags& memory, const CLI::App& sub) {
  for (ReplicaGroupConfig& g : c.groups) {
    if (engine.dtype != "auto") g.dtype = engine.dtype;
    if (engine.kv_cache_dtype != "auto") g.kv_dtype = engine.kv_cache_dtype;
  }
  if (sched.preset) c.scheduler_preset = *sched.preset;
  c.overrides = scheduler_overrides(sched);
  c.overrides.max_model_len = max_model_len_number(memory.max_model_len);
  c.max_model_len_auto = max_model_len_is_auto(memory.max_model_len);
  if (memory.num_gpu_blocks) {
    c.num_gpu_blocks_override = *memory.num_gpu_blocks;
    for (ReplicaGroupConfig& g : c.groups) g.num_gpu_blocks_override = -1;
  }
  if (sub.count("--gpu-memory-utilization") > 0) {
    c.gpu_memory_utilization = memory.gpu_memory_utilization;
    for (ReplicaGroupConfig& g : c.groups) g.gpu_memory_utilization = 0;
  }
}

}  // namespace twin::cli
