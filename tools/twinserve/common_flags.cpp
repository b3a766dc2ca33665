#include "tools/twinserve/common_flags.hpp"

#include <CLI/CLI.hpp>

#include "base/error.hpp"
#include "engine/core/scheduler_config.hpp"
#include "sim/cluster_config.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "traces/trace_format.hpp"

namespace twin::cli {

void add_trace_input_flags(CLI::App& sub, TraceInputFlags& f, const std::string& trace_help, bool required) {
  CLI::Option* trace = sub.add_option("--trace", f.path, trace_help)->check(non_empty());
  if (required) trace->required();
  sub.add_option("--format", f.format, "Trace format (default: detected)");
  sub.add_option("--on-bad-row", f.on_bad_row, "A malformed trace row: error (stop, naming FILE:LINE) or skip (count)");
  sub.add_option("--max-requests", f.max_requests, "Use the trace's first N requests (default: all)")
      ->check(CLI::NonNegativeNumber);
}

void add_trace_arrival_flags(CLI::App& sub, TraceInputFlags& f) {
  sub.add_option("--rate", f.rate,
                 "Traces without arrival times (vidur-lengths, sharegpt): Poisson arrivals at R requests/s, as "
                 "`trace convert --rate` gives them; a trace with its own times refuses it")
      ->check(real_range(0, 1e9, true));
  sub.add_option("--arrival-seed", f.arrival_seed, "With --rate: seed of the arrival process (default 0)")
      ->check(CLI::NonNegativeNumber);
}

TraceReadOptions trace_read_options(const TraceInputFlags& f) {
  TraceReadOptions read;
  read.arrivals.rate = f.rate;  // poisson, the reader's default kind
  read.arrivals.seed = f.arrival_seed;
  if (!f.format.empty()) read.format = parse_format_name(f.format);
  read.on_bad_row = parse_bad_row_policy(f.on_bad_row);
  return read;
}

void add_output_flags(CLI::App& sub, OutputFlags& f, const std::string& out_help, bool required) {
  CLI::Option* out = sub.add_option("--out", f.dir, out_help)->check(non_empty());
  if (required) out->required();
  add_switch(sub, FlagId::overwrite, f.overwrite, "the result files in --out");
}

void add_result_file_flags(CLI::App& sub, ResultFileFlags& f) {
  sub.add_option("--steps", f.steps,
                 "Which steps steps.csv keeps: all (default), none (no steps.csv), sample:N (the steps whose step_id "
                 "is a multiple of N, per replica); the summary counts every step either way");
  add_switch(sub, FlagId::no_steps, f.no_steps, "same as --steps none");
  sub.add_option("--compress", f.compress,
                 "Compress requests.csv and steps.csv as they are written: none (default), gz (requests.csv.gz, gzip "
                 "level 1) or zst (requests.csv.zst, zstd level 3); summary.json stays plain");
}

ResultFileOptions result_file_options(const ResultFileFlags& f) {
  ResultFileOptions options;
  options.steps = parse_step_selection(f.steps, "--steps");
  if (f.no_steps) {
    if (f.steps != "all" && f.steps != "none") throw UsageError("--no-steps and --steps " + f.steps + " disagree; give one");
    options.steps = StepSelection{0};
  }
  options.compression = parse_csv_compression(f.compress, "--compress");
  return options;
}

void add_engine_flags(CLI::App& sub, EngineFlags& f) {
  sub.add_option("--backend", f.backend, "Engine backend: cpu (default), cuda or auto (cuda where a device is usable)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  sub.add_option("--threads", f.threads, "CPU worker threads (default: one per hardware thread)")->check(thread_count());
  add_flag(sub, FlagId::dtype, f.dtype, "the engine: f32 or bf16; validate: auto is the profile's");
  add_flag(sub, FlagId::kv_cache_dtype, f.kv_cache_dtype,
           "the engine: f32, bf16 or fp8 (per-tensor scales of 1); validate: auto is the profile's");
  add_flag(sub, FlagId::quantization, f.quantization,
           "the engine: int8 quantises the projections' weights at load to int8 with per-channel scales "
           "(weight-only, cpu backend, dense and MoE models: the experts too); fp8 to fp8 E4M3 with per-channel "
           "scales, activations per token (W8A8; cuda on compute capability 8.9+, or the cpu's reference; dense "
           "models); validate: the profile's")
      ->check(CLI::IsMember({"int8", "fp8", "none"}));
  sub.add_flag("--cuda-graphs", f.cuda_graphs,
               "cuda: run decode-only steps of dense models through CUDA graphs, padded to vLLM's capture sizes "
               "(1, 2, 4, 8, 16, ... up to --max-num-seqs, at most 512), one graph per size and context bucket "
               "(docs/cuda.md; off by default: on an H200 graph steps were 5% slower at batch 154)");
}

void add_engine_memory_flags(CLI::App& sub, EngineMemoryFlags& f) {
  add_flag(sub, FlagId::max_model_len, f.max_model_len);
  add_flag(sub, FlagId::num_gpu_blocks_override, f.num_gpu_blocks,
           "the engine: default 1 GiB of KV on the cpu, the memory plan on cuda")
      ->check(int_range(1, kMaxKnobCount));
  sub.add_option("--kv-cache-memory-bytes", f.kv_cache_memory_bytes,
                 "KV cache size in bytes (default: 1 GiB on the cpu, the memory plan on cuda)")
      ->check(int_range(1, std::int64_t{1} << 50));
  add_flag(sub, FlagId::gpu_memory_utilization, f.gpu_memory_utilization, "the engine: cuda only");
  sub.add_option("--swap-space", f.swap_space_gib, "Host swap space for KV in GiB (default 0)")->check(real_range(0, 1024));
}

void add_kv_offload_flags(CLI::App& sub, EngineMemoryFlags& f) {
  add_flag(sub, FlagId::kv_offload_dram_gib, f.kv_offload_dram_gib, "the engine's (docs/engine.md)");
  add_flag(sub, FlagId::kv_offload_ssd_gib, f.kv_offload_ssd_gib, "a file in --kv-offload-ssd-dir");
  sub.add_option("--kv-offload-ssd-dir", f.kv_offload_ssd_dir,
                 "Folder for the SSD tier's file (default: the temporary directory; the file is removed on open)");
}

std::optional<std::int32_t> max_model_len_number(const std::optional<std::string>& flag) {
  if (!flag || max_model_len_is_auto(flag)) return std::nullopt;
  return static_cast<std::int32_t>(std::stol(*flag));
}

bool max_model_len_is_auto(const std::optional<std::string>& flag) { return flag && is_auto_max_model_len(*flag); }

RunnerOptions runner_options(const EngineFlags& engine, const EngineMemoryFlags* memory, std::uint64_t seed) {
  RunnerOptions o;
  o.backend = engine.backend;
  o.threads = engine.threads;
  o.weight_dtype = engine.dtype;
  o.kv_cache_dtype = engine.kv_cache_dtype;
  o.quantization = engine.quantization;  // "none" kept: validate tells it from unset
  o.cuda_graphs = engine.cuda_graphs;
  o.seed = seed;
  if (memory) {
    o.num_blocks = memory->num_gpu_blocks.value_or(0);
    o.kv_cache_memory_bytes = memory->kv_cache_memory_bytes.value_or(0);
    o.gpu_memory_utilization = memory->gpu_memory_utilization;
    o.swap_space_bytes = static_cast<std::int64_t>(memory->swap_space_gib * static_cast<double>(std::int64_t{1} << 30));
    o.kv_offload_dram_bytes =
        static_cast<std::int64_t>(memory->kv_offload_dram_gib * static_cast<double>(std::int64_t{1} << 30));
    o.kv_offload_ssd_bytes = static_cast<std::int64_t>(memory->kv_offload_ssd_gib * static_cast<double>(std::int64_t{1} << 30));
    o.kv_offload_ssd_dir = memory->kv_offload_ssd_dir;
  }
  return o;
}

}  // namespace twin::cli
