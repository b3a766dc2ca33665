#pragma once
// The engine's one entry point. `twinserve run`, `validate`, `calibrate`'s
// step scenarios and the parity tests all build the engine here from one
// settings struct, so they cannot disagree about the weights' dtype, the KV
// cache's dtype and size, or the scheduler: the runner sizes its KV cache
// (on a GPU from the device's memory, as vLLM does) and the replica's block
// counts are taken from what it allocated.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/record_stream.hpp"
#include "engine/core/replica.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/model_config.hpp"
#include "engine/runtime/model_runner.hpp"
#include "engine/runtime/proposer.hpp"
#include "engine/runtime/wall_clock_driver.hpp"
#include "models/speculative_config.hpp"

namespace twin {

struct EngineSettings {
  // Model name or config path as `run --model`; empty: runner.weights_dir's
  // config.json.
  std::string model;
  // A model already resolved (calibrate's, a test's own config): used in
  // place of `model` where set.
  std::optional<ModelConfig> model_config;
  // Backend, threads, weights, seed, weight and KV dtypes, KV memory. The
  // block size, the KV block counts (where given) and the scheduler's limits
  // are taken from `replica`.
  RunnerOptions runner;
  // Scheduler and KV policy. kv.num_blocks > 0 fixes the device blocks
  // (--num-gpu-blocks-override); 0 leaves them to the runner's memory plan.
  ReplicaConfig replica;
  // vLLM's --max-model-len auto: once the runner has sized the KV cache from
  // memory, max_model_len comes down to the largest one request of which it
  // holds (engine/core/kv_fit.hpp). Without it a cache that cannot hold
  // max_model_len is refused, as vLLM refuses to start.
  bool max_model_len_auto = false;
  ExecutorOptions sampling;
  // Time each op of every step (ModelRunner::set_time_ops): a clock read per
  // op on the CPU, an event recorded per op on a GPU (no synchronisation,
  // but a few hundred extra stream operations per step).
  bool time_ops = false;
  // Speculative decoding (--speculative-config): sets the replica's
  // num_speculative_tokens and the proposer (n-gram lookup or a draft model
  // beside the target). Greedy verification only: temperature must be 0.
  std::optional<SpeculativeConfig> speculative;
  // The replicas of this process, one role each (engine/core/
  // disaggregation.hpp; docs/disaggregation.md). Empty: one mixed replica.
  // Prefill and decode roles make a disaggregated cluster on one device:
  // replica i serves with role roles[i] on its own runner, the first one's
  // siblings (ModelRunner::make_sibling: one backend, the weights shared,
  // each its own KV pool of the replica's block count), and the KV moves
  // between them by block copies (WallClock::kv_transfer).
  std::vector<ReplicaRole> roles;
  DisaggOptions disagg;  // with pool roles: the mode and the pools' routers
};

// The model the settings name: model_config where set, else `model` (or
// runner.weights_dir's config.json) resolved. UsageError when neither is given.
ModelConfig engine_model_config(const EngineSettings& settings);

class Engine {
 public:
  // Loads the weights and allocates the KV cache and scratch. Throws
  // UsageError for bad settings, twin::Error when memory or weights fail.
  explicit Engine(EngineSettings settings);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelConfig& model() const { return model_; }
  // The replica as served: the settings' with the KV block counts allocated
  // (every replica's; each takes its role from roles()).
  const ReplicaConfig& replica_config() const { return settings_.replica; }
  // One role per replica (a single mixed one without pools).
  const std::vector<ReplicaRole>& roles() const { return roles_; }
  std::int32_t num_replicas() const { return static_cast<std::int32_t>(roles_.size()); }
  bool disaggregated() const { return roles_.size() > 1 || roles_.front() != ReplicaRole::mixed; }
  const EngineSettings& settings() const { return settings_; }
  ModelRunner& runner() { return *runner_; }
  // A fresh proposer for one serve (null without speculation). The draft
  // model's runner is the engine's; the proposer borrows it.
  std::unique_ptr<Proposer> make_proposer();
  const ModelRunner& runner() const { return *runner_; }
  // "llama-3.1-8b (bf16 weights, bf16 KV, random weights seed 0) on NVIDIA H200,
  // 26645 KV blocks of 16 tokens, preset vllm"
  std::string description() const;
  // The memory plan in one line where the device's memory sized the KV
  // cache; empty otherwise.
  std::string memory_plan_line() const;
  // The settings and the allocation, for summary.json's config echo (the
  // same keys for run and validate).
  nlohmann::ordered_json config_echo() const;

  // Serves the source's requests on fresh replicas against the wall clock;
  // records go to the sink. The weights and KV memory are reused, so a
  // second call serves a second run from the same state (prefix cache
  // emptied, as on a fresh replica).
  DriveStats serve(RequestSource& source, RecordSink& sink, const DriveOptions& options);
  // Per step of the last serve (time_ops): step id and time per op.
  const std::vector<std::pair<std::uint64_t, OpTimes>>& step_op_times() const { return step_op_ns_; }
  // The first replica's KV cache counters and its tiers' (empty without)
  // after the last serve, for summary.json's kv_tiers.
  const KvCacheStats& last_kv_stats() const { return last_kv_stats_; }
  const std::vector<KvTierStats>& last_tier_stats() const { return last_tier_stats_; }

 private:
  EngineSettings settings_;
  ModelConfig model_;
  std::vector<ReplicaRole> roles_;
  std::unique_ptr<ModelRunner> runner_;                  // replica 0's
  std::vector<std::unique_ptr<ModelRunner>> siblings_;  // replicas 1..n-1: runner_'s siblings
  std::unique_ptr<ModelRunner> draft_runner_;  // draft_model: built once, handed to each serve's proposer
  std::vector<std::pair<std::uint64_t, OpTimes>> step_op_ns_;
  KvCacheStats last_kv_stats_;
  std::vector<KvTierStats> last_tier_stats_;

  std::string pools_line() const;  // "1 prefill + 1 decode replicas (...)"
};

}  // namespace twin
