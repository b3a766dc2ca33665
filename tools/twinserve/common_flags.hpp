#pragma once
// Flag groups every subcommand that reads a trace, runs the engine or writes
// results shares, registered in one place so their names, aliases, checks
// and help cannot drift apart between run, simulate, validate, calibrate,
// sweep and plan.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/runtime/model_runner.hpp"
#include "metrics/result_files.hpp"
#include "traces/trace_reader.hpp"

namespace CLI {
class App;
}

namespace twin::cli {

// --trace, --format, --on-bad-row, --max-requests.
struct TraceInputFlags {
  std::string path;
  std::string format;  // empty: detected
  std::string on_bad_row = "error";
  std::int64_t max_requests = 0;  // 0: the whole trace
  // Arrivals for traces without times (vidur-lengths, sharegpt):
  // add_trace_arrival_flags; 0: not given.
  double rate = 0;
  std::uint64_t arrival_seed = 0;
};
void add_trace_input_flags(CLI::App& sub, TraceInputFlags& flags, const std::string& trace_help, bool required);
// --rate R and --arrival-seed S: Poisson arrivals at R requests/s for a
// length-only or ShareGPT trace, the reader's rule (traces/arrival_process),
// the same arrivals `trace convert --rate R --arrival-seed S` writes
// (simulate, plan).
void add_trace_arrival_flags(CLI::App& sub, TraceInputFlags& flags);
// The reader's options the flags name (UsageError for an unknown format or policy).
TraceReadOptions trace_read_options(const TraceInputFlags& flags);

// --out and --overwrite.
struct OutputFlags {
  std::string dir;
  bool overwrite = false;
};
void add_output_flags(CLI::App& sub, OutputFlags& flags, const std::string& out_help, bool required);

// --steps none|sample:N|all, --no-steps (= --steps none) and
// --compress none|gz|zst: what steps.csv keeps and how the CSVs are written
// (run, simulate; metrics/result_files.hpp).
struct ResultFileFlags {
  std::string steps = "all";
  bool no_steps = false;
  std::string compress = "none";
};
void add_result_file_flags(CLI::App& sub, ResultFileFlags& flags);
// UsageError naming the flag for a selection or compression it does not know.
ResultFileOptions result_file_options(const ResultFileFlags& flags);

// The engine: --backend, --threads, --dtype, --kv-cache-dtype,
// --quantization (run, validate, calibrate, serve). "auto" dtypes are the
// checkpoint's (validate: the profile's, which a given one must match);
// so is an unset quantization under validate.
struct EngineFlags {
  std::string backend = "cpu";
  std::int32_t threads = 0;  // 0: one per hardware thread
  std::string dtype = "auto", kv_cache_dtype = "auto";
  std::string quantization;  // "", none or int8 (weight-only, quantised at load)
  bool cuda_graphs = false;  // decode steps through CUDA graphs (RunnerOptions::cuda_graphs)
};
void add_engine_flags(CLI::App& sub, EngineFlags& flags);

// The engine's memory plan: --max-model-len, --num-gpu-blocks-override
// (alias --num-gpu-blocks), --kv-cache-memory-bytes,
// --gpu-memory-utilization, --swap-space (run, validate).
struct EngineMemoryFlags {
  std::optional<std::string> max_model_len;    // unset: the model's context; "auto": what fits (max_model_len_flag)
  std::optional<std::int32_t> num_gpu_blocks;  // unset: the memory plan
  std::optional<std::int64_t> kv_cache_memory_bytes;  // unset: the memory plan
  double gpu_memory_utilization = 0.9;
  double swap_space_gib = 0;
  // KV tiers below the device (run only: add_kv_offload_flags).
  double kv_offload_dram_gib = 0, kv_offload_ssd_gib = 0;
  std::string kv_offload_ssd_dir;
};
void add_engine_memory_flags(CLI::App& sub, EngineMemoryFlags& flags);
// --kv-offload-dram-gib, --kv-offload-ssd-gib, --kv-offload-ssd-dir: the
// engine's KV tiers (run; simulate has its own, with the same names).
void add_kv_offload_flags(CLI::App& sub, EngineMemoryFlags& flags);

// --max-model-len as typed (max_model_len_value checked it): the number, or
// nothing for unset and for vLLM's "auto" / -1, which is_auto_max_model_len
// (sim/cluster_config.hpp) tells.
std::optional<std::int32_t> max_model_len_number(const std::optional<std::string>& flag);
bool max_model_len_is_auto(const std::optional<std::string>& flag);

// The runner the flags describe (seed: weights, prompt tokens); memory may
// be null (calibrate sizes its own caches). The block count and
// max_model_len are settled against the model by engine_settings
// (engine/runtime/engine_setup), the one rule for run and validate.
RunnerOptions runner_options(const EngineFlags& engine, const EngineMemoryFlags* memory, std::uint64_t seed);

}  // namespace twin::cli
