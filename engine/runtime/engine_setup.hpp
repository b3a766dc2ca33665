#pragma once
// What a command asks of the engine, in its flags' terms, and the one rule
// that settles it against the model. `run`, `validate` (and any front end
// that serves on the engine) fill an EngineSetup from the same flag groups
// and call engine_settings(), so they cannot differ in how the context
// length, the KV block count or memory, the swap space or the stop rule are
// decided: the cause of validate serving another engine than run's.
#include <optional>
#include <string>
#include <vector>

#include "engine/core/replica_overrides.hpp"
#include "engine/runtime/engine.hpp"

namespace twin {

struct EngineSetup {
  // Model name or config path; empty: runner.weights_dir's config.json.
  std::string model;
  std::string scheduler_preset = "vllm";
  // The scheduler flags. max_model_len unset: the model's context (a larger
  // one is refused); num_gpu_blocks unset: runner.num_blocks, else the
  // memory plan.
  ReplicaOverrides overrides;
  // --max-model-len auto (EngineSettings::max_model_len_auto).
  bool max_model_len_auto = false;
  // Backend, threads, weights, seed, dtypes and KV memory
  // (--kv-cache-memory-bytes, --swap-space, --gpu-memory-utilization).
  RunnerOptions runner;
  // Sampling; eos_token >= 0 also stops requests at EOS.
  ExecutorOptions sampling;
  std::optional<SpeculativeConfig> speculative;
  bool time_ops = false;
  // Prefill and decode replicas in the process (EngineSettings::roles).
  std::vector<ReplicaRole> roles;
  DisaggOptions disagg;
};

// Resolves the model, checks the setup against it and against itself
// (UsageError naming the flag), and returns the settings Engine takes.
EngineSettings engine_settings(const EngineSetup& setup);

}  // namespace twin
