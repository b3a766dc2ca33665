#include "metrics/config_echo.hpp"

namespace twin {

void echo_replica(const ReplicaConfig& replica, std::int64_t num_gpu_blocks, nlohmann::ordered_json& echo) {
  const SchedulerConfig& s = replica.scheduler;
  echo["scheduler_preset"] = s.preset;
  echo["max_num_batched_tokens"] = effective_token_budget(s);
  echo["max_num_seqs"] = s.max_num_seqs;
  echo["max_model_len"] = s.max_model_len;
  echo["enable_chunked_prefill"] = s.enable_chunked_prefill;
  echo["block_size"] = replica.kv.block_size;
  echo["enable_prefix_caching"] = replica.kv.enable_prefix_caching;
  echo["async_scheduling"] = s.async_scheduling;
  echo["num_gpu_blocks"] = num_gpu_blocks;
}

void echo_stop(bool stopped, std::int64_t interrupted_requests, nlohmann::ordered_json& echo) {
  if (!stopped) return;
  echo["interrupted"] = true;
  echo["interrupted_requests"] = interrupted_requests;
}

}  // namespace twin
