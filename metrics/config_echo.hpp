#pragma once
// The keys summary.json's config echo gives for what every run has, the
// simulator's (per resolved group) and the engine's alike: one writer, so the
// two sides cannot name or order them differently.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "engine/core/replica.hpp"

namespace twin {

// scheduler_preset, max_num_batched_tokens (the effective budget),
// max_num_seqs, max_model_len, enable_chunked_prefill, block_size,
// enable_prefix_caching, async_scheduling and num_gpu_blocks (the blocks
// allocated, which the caller knows: the config's may be 0, "from memory").
void echo_replica(const ReplicaConfig& replica, std::int64_t num_gpu_blocks, nlohmann::ordered_json& echo);

// A run stopped early (Ctrl-C, a stop callback): "interrupted": true and the
// requests then in flight; nothing for a run that ended by itself.
void echo_stop(bool stopped, std::int64_t interrupted_requests, nlohmann::ordered_json& echo);

}  // namespace twin
