// twinserve run: a request trace through the real engine (the transformer on
// a backend, scheduled by the same core as the simulator) against the wall
// clock. Writes the simulator's result files, so a run can be replayed and
// diffed. Scheduler flags are the same vLLM names as `simulate`.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/backend.hpp"
#include "engine/backend/cuda/memory_plan.hpp"
#include "engine/core/error.hpp"
#include "engine/core/replica.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/model_config.hpp"
#include "engine/runtime/model_runner.hpp"
#include "engine/runtime/wall_clock_driver.hpp"
#include "metrics/collector.hpp"
#include "metrics/output_dir.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/slo.hpp"
#include "metrics/step_csv.hpp"
#include "metrics/summary_json.hpp"
#include "metrics/summary_table.hpp"
#include "models/model_desc.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/scheduler_flags.hpp"
#include "traces/trace_reader.hpp"

namespace twin::cli {
namespace {

struct RunArgs {
  std::string trace, out_dir, trace_format, on_bad_row = "error", backend = "cpu", dtype = "auto";
  std::optional<std::string> model, weights, slo;
  std::optional<std::int32_t> max_model_len, num_gpu_blocks;
  std::optional<std::int64_t> kv_cache_memory_bytes;
  double swap_space_gib = 0;
  double gpu_memory_utilization = 0.9;
  double time_scale = 1.0;
  bool asap = false;
  std::uint64_t seed = 0;
  std::int32_t threads = 0;
  float temperature = 0.0f, top_p = 1.0f;
  std::int32_t top_k = 0;
  std::optional<std::int32_t> eos_token;
  SchedulerFlags sched;
  std::int64_t max_requests = 0;
  bool no_steps = false, overwrite = false;
};

constexpr std::int64_t kDefaultKvBytes = std::int64_t{1} << 30;  // the CPU has no memory plan; 1 GiB of KV

// Parameter bytes the runner will hold: bf16 matrices with --dtype bf16,
// else f32 (a bf16 checkpoint under --dtype auto is counted at 4 bytes: the
// plan errs on the side of fitting).
std::int64_t planned_weight_bytes(const ModelConfig& m, const std::string& dtype) {
  const std::int64_t H = m.hidden_size, I = m.intermediate_size, qkv = m.q_dim() + 2 * m.kv_dim();
  const std::int64_t E = std::max<std::int64_t>(m.num_experts, 1);
  std::int64_t per_layer = qkv * H + m.q_dim() * H + 2 * H + E * 3 * I * H + (m.is_moe() ? E * H : 0);
  if (m.attention_bias) per_layer += qkv;
  const std::int64_t params = m.num_layers * per_layer + m.vocab_size * H * (m.tie_word_embeddings ? 1 : 2) + H;
  return params * (dtype == "bf16" ? 2 : 4);
}

// Activation workspace at the step budget: the runner's f32 scratch (which
// grows by doubling, hence 2x), the backend's bf16 GEMM input and MoE rows,
// the device sampler's sort space (one chunk of rows, 2x for doubling), the
// attention split-K partials (256 MiB at most) and 512 MiB for cuBLAS and
// allocator slack.
std::int64_t planned_workspace_bytes(const ModelConfig& m, const SchedulerConfig& sc) {
  const std::int64_t T = effective_token_budget(sc), S = sc.max_num_seqs;
  const std::int64_t H = m.hidden_size, I = m.intermediate_size, qkv = m.q_dim() + 2 * m.kv_dim();
  const std::int64_t K = std::max<std::int64_t>(m.experts_per_token, 1);
  const std::int64_t per_token = 3 * H + qkv + m.q_dim() + 3 * I + std::max<std::int64_t>(m.num_experts, 1) + 2 * K;
  const std::int64_t runner = 2 * (T * per_token + S * (2 * H + m.vocab_size)) * 4;
  const std::int64_t gemm_in = 2 * T * std::max({H, I, m.q_dim()}) * 2;
  const std::int64_t moe = m.is_moe() ? 2 * T * K * (2 * H + 3 * I) * 4 : 0;
  const std::int64_t sampling = sampling_workspace_bytes(m.vocab_size, S);
  return runner + gemm_in + moe + sampling + (std::int64_t{768} << 20);
}

// --gpu-memory-utilization (vLLM's plan) on a CUDA device: the KV cache gets
// what is left of that fraction of device memory after what is in use, the
// weights and the workspace. The CPU has no plan: 1 GiB of KV. Only asked
// when neither --num-gpu-blocks-override nor --kv-cache-memory-bytes is given.
std::int64_t default_kv_bytes(const RunArgs& a, const ModelConfig& m, const SchedulerConfig& sc,
                              std::int64_t block_bytes) {
  if (a.backend == "cpu") return kDefaultKvBytes;
  BackendOptions bo;
  bo.threads = 1;
  const std::unique_ptr<Backend> probe = make_backend(a.backend, bo);  // throws with the reason for "cuda"
  if (probe->name() != "cuda") return kDefaultKvBytes;                 // "auto" without a device
  const DeviceInfo info = probe->device_info();
  const KvMemoryPlan plan = plan_kv_memory(info.total_bytes, info.free_bytes, a.gpu_memory_utilization,
                                           planned_weight_bytes(m, a.dtype), planned_workspace_bytes(m, sc), block_bytes);
  auto gib = [](std::int64_t b) { return static_cast<double>(b) / static_cast<double>(std::int64_t{1} << 30); };
  std::cerr << "memory plan on " << info.name << ": " << a.gpu_memory_utilization << " x " << gib(info.total_bytes)
            << " GiB - " << gib(plan.in_use_bytes) << " GiB in use - " << gib(plan.weight_bytes) << " GiB weights - "
            << gib(plan.workspace_bytes) << " GiB workspace = " << gib(plan.kv_bytes) << " GiB of KV\n";
  return plan.kv_bytes;
}

ReplicaConfig make_replica_config(const RunArgs& a, const ModelConfig& model) {
  ReplicaConfig rc = replica_preset(a.sched.preset.value_or("vllm"));
  auto opt = [&](const char* key, const std::string& value) { set_replica_option(rc, key, value); };
  const std::int32_t context = static_cast<std::int32_t>(std::min<std::int64_t>(model.max_position_embeddings, 1 << 30));
  if (a.max_model_len && *a.max_model_len > context) {
    throw UsageError("--max-model-len " + std::to_string(*a.max_model_len) + " exceeds the context of model '" +
                     model.name + "' (" + std::to_string(context) + ")");
  }
  opt("max_model_len", std::to_string(a.max_model_len.value_or(context)));
  if (a.eos_token) opt("stop_at_eos", "true");
  for (const auto& [key, value] : scheduler_overrides(a.sched)) set_replica_option(rc, key, value);
  const std::int64_t block_bytes = kv_block_bytes(model, rc.kv.block_size);
  if (a.num_gpu_blocks) {
    if (a.kv_cache_memory_bytes) throw UsageError("--num-gpu-blocks-override and --kv-cache-memory-bytes contradict");
    opt("num_gpu_blocks", std::to_string(*a.num_gpu_blocks));
  } else if (rc.kv.num_blocks == 0) {
    const std::int64_t bytes = a.kv_cache_memory_bytes ? *a.kv_cache_memory_bytes
                                                       : default_kv_bytes(a, model, rc.scheduler, block_bytes);
    if (bytes < block_bytes) {
      throw UsageError("--kv-cache-memory-bytes " + std::to_string(bytes) + " holds no KV block of " +
                       std::to_string(block_bytes) + " bytes");
    }
    rc.kv.num_blocks = static_cast<std::int32_t>(std::min<std::int64_t>(bytes / block_bytes, 1 << 30));
  }
  if (a.swap_space_gib < 0) throw UsageError("--swap-space must be >= 0 GiB");
  if (a.swap_space_gib > 0) {
    rc.kv.num_host_blocks =
        static_cast<std::int32_t>(static_cast<double>(std::int64_t{1} << 30) * a.swap_space_gib / static_cast<double>(block_bytes));
  }
  validate(rc);
  return rc;
}

void run(const RunArgs& a) {
  if (!a.model && !a.weights) throw UsageError("run needs --model NAME (or --weights DIR holding a config.json)");
  if (!(a.time_scale > 0)) throw UsageError("--time-scale must be positive");
  const ModelConfig model = model_config_from(resolve_model(a.model.value_or(a.weights.value_or(""))));
  const ReplicaConfig rc = make_replica_config(a, model);
  const std::vector<Slo> slos = parse_slos(a.slo.value_or(""));

  RunnerOptions ro;
  ro.backend = a.backend;
  ro.threads = a.threads;
  ro.weights_dir = a.weights.value_or("");
  ro.seed = a.seed;
  ro.weight_dtype = a.dtype;
  ro.num_blocks = rc.kv.num_blocks;
  ro.block_size = rc.kv.block_size;
  ro.num_host_blocks = rc.kv.num_host_blocks;
  if (ro.backend != "cpu" && ro.backend != "auto" && ro.backend != "cuda") {
    throw UsageError("unknown --backend '" + ro.backend + "' (known: auto, cpu, cuda)");
  }
  TraceReadOptions read;
  if (!a.trace_format.empty()) read.format = parse_format_name(a.trace_format);
  read.on_bad_row = parse_bad_row_policy(a.on_bad_row);
  TraceReader reader(a.trace, read);

  std::optional<OutputDir> dir;
  std::ofstream requests_file, steps_file;
  std::unique_ptr<RequestCsvWriter> request_writer;
  std::unique_ptr<StepCsvWriter> step_writer;
  if (!a.out_dir.empty()) {
    std::vector<std::string> files = {"requests.csv", "summary.json"};
    if (!a.no_steps) files.push_back("steps.csv");
    dir.emplace(a.out_dir, a.overwrite, files);
  }
  ModelRunner runner(model, ro);  // loads the weights: after every cheap check
  std::cerr << "engine: " << model.name << " (" << runner.weight_dtype_name() << ", "
            << (ro.weights_dir.empty() ? "random weights, seed " + std::to_string(ro.seed) : ro.weights_dir) << ") on "
            << runner.device_name() << ", " << rc.kv.num_blocks << " KV blocks of " << rc.kv.block_size
            << " tokens, preset " << rc.scheduler.preset << "\n";
  if (dir) {
    requests_file = dir->open("requests.csv");
    request_writer = std::make_unique<RequestCsvWriter>(requests_file);
    if (!a.no_steps) {
      steps_file = dir->open("steps.csv");
      step_writer = std::make_unique<StepCsvWriter>(steps_file);
    }
  }

  ExecutorOptions eo;
  eo.temperature = a.temperature;
  eo.top_k = a.top_k;
  eo.top_p = a.top_p;
  eo.seed = a.seed;
  eo.eos_token = a.eos_token.value_or(-1);
  Executor executor(runner, eo);
  Replica replica(rc, 0);
  MetricsCollector collector;
  DriveCallbacks callbacks;
  callbacks.on_request = [&](const RequestRecord& r) {
    collector.add(r);
    if (request_writer) request_writer->write(r);
  };
  callbacks.on_step = [&](const StepRecord& s) {
    collector.add(s);
    if (step_writer) step_writer->write(s);
  };
  DriveOptions options;
  options.time_scale = a.time_scale;
  options.asap = a.asap;
  options.token_seed = a.seed;
  std::int64_t read_count = 0;
  const DriveStats stats = drive_wall_clock(
      replica, executor,
      [&](Request& r) {
        if (a.max_requests > 0 && read_count >= a.max_requests) return false;
        if (!reader.next(r)) return false;
        ++read_count;
        return true;
      },
      options, callbacks);

  SummaryContext context;
  context.slos = slos;
  context.num_replicas = 1;
  context.kv_blocks_capacity = rc.kv.num_blocks;
  context.simulated_time_s = to_seconds(stats.end_time);
  context.wall_time_s = stats.wall_time_s;
  nlohmann::ordered_json& echo = context.config;
  echo["mode"] = "engine";
  echo["trace"] = a.trace;
  if (a.max_requests > 0) echo["max_requests"] = a.max_requests;
  echo["model"] = model.name;
  echo["weights"] = ro.weights_dir.empty() ? "random" : ro.weights_dir;
  echo["weight_dtype"] = runner.weight_dtype_name();
  echo["backend"] = a.backend;
  echo["device"] = runner.device_name();
  echo["seed"] = a.seed;
  echo["time_scale"] = a.time_scale;
  echo["asap"] = a.asap;
  echo["scheduler_preset"] = rc.scheduler.preset;
  echo["max_num_batched_tokens"] = effective_token_budget(rc.scheduler);
  echo["max_num_seqs"] = rc.scheduler.max_num_seqs;
  echo["max_model_len"] = rc.scheduler.max_model_len;
  echo["enable_chunked_prefill"] = rc.scheduler.enable_chunked_prefill;
  echo["block_size"] = rc.kv.block_size;
  echo["enable_prefix_caching"] = rc.kv.enable_prefix_caching;
  echo["num_gpu_blocks"] = rc.kv.num_blocks;
  echo["num_host_blocks"] = rc.kv.num_host_blocks;
  echo["kv_block_bytes"] = runner.kv_block_bytes();
  echo["weight_bytes"] = runner.weight_bytes();
  echo["temperature"] = a.temperature;
  echo["unserved"] = stats.unserved;
  const Summary summary = collector.summarize(context);
  if (dir) {
    requests_file.flush();
    if (!requests_file) throw Error(a.out_dir + "/requests.csv: write failed");
    if (step_writer) {
      steps_file.flush();
      if (!steps_file) throw Error(a.out_dir + "/steps.csv: write failed");
    }
    std::ofstream summary_file = dir->open("summary.json");
    write_summary_json(summary_file, summary);
    if (!summary_file) throw Error(a.out_dir + "/summary.json: write failed");
  }
  const auto& report = reader.report();
  if (report.skipped_bad > 0 || report.reordered > 0) {
    std::cerr << "trace: " << report.skipped_bad << " bad rows skipped, " << report.reordered
              << " rows out of order clamped\n";
  }
  if (summary.rejected > 0) {
    std::cerr << "warning: " << summary.rejected << " requests rejected (prompt + output beyond max_model_len "
              << rc.scheduler.max_model_len << " or the KV cache)\n";
  }
  if (stats.unserved > 0) std::cerr << "warning: " << stats.unserved << " requests could never be scheduled\n";
  print_summary_table(std::cout, summary);
  std::cout << "Ran " << stats.steps << " steps in " << stats.wall_time_s << " s wall\n";
  if (!a.out_dir.empty()) std::cout << "Wrote results to " << a.out_dir << "\n";
}

const RegisterCommand registration{"run", [](CLI::App& root) {
  auto args = std::make_shared<RunArgs>();
  auto* sub = root.add_subcommand("run", "Serve a request trace on the real engine against the wall clock");
  auto& a = *args;
  sub->add_option("--trace", a.trace, "Request trace (any format `trace stats` reads)")->required();
  sub->add_option("--model", a.model, "Model name or config.json path / HF folder (default: --weights' config.json)");
  sub->add_option("--weights", a.weights, "Folder of *.safetensors (f32, f16, bf16); default: random weights from --seed");
  sub->add_option("--dtype", a.dtype, "Weight storage: auto (checkpoint's f32/bf16), f32 or bf16");
  sub->add_option("--backend", a.backend, "auto, cpu or cuda");
  sub->add_option("--threads", a.threads, "CPU worker threads (default: one per hardware thread)");
  sub->add_option("--time-scale", a.time_scale, "Replay arrivals K times faster than the trace");
  sub->add_flag("--asap", a.asap, "Submit every request at t=0 (throughput run)");
  sub->add_option("--seed", a.seed, "Seed for random weights, prompt tokens and sampling")->check(CLI::NonNegativeNumber);
  sub->add_option("--temperature", a.temperature, "Sampling temperature (0: greedy)");
  sub->add_option("--top-k", a.top_k, "Top-k cut (0: none)");
  sub->add_option("--top-p", a.top_p, "Nucleus cut (1: none)");
  sub->add_option("--eos-token", a.eos_token, "Stop a request when it samples this token (default: run to the trace's output length)");
  sub->add_option("--slo", a.slo, "SLOs, e.g. 'ttft_p90<=2s,tpot_p99<=100ms'");
  add_scheduler_flags(*sub, a.sched);
  sub->add_option("--max-model-len", a.max_model_len, "Prompt + output tokens at most (default: the model's context)");
  sub->add_option("--num-gpu-blocks-override,--num-gpu-blocks", a.num_gpu_blocks, "KV blocks");
  sub->add_option("--kv-cache-memory-bytes", a.kv_cache_memory_bytes,
                  "KV cache size in bytes (default: 1 GiB on the cpu, the memory plan on cuda)");
  sub->add_option("--gpu-memory-utilization", a.gpu_memory_utilization,
                  "cuda: fraction of device memory for weights, workspace and KV (default 0.9)");
  sub->add_option("--swap-space", a.swap_space_gib, "Host swap space for KV in GiB (default 0)");
  sub->add_option("--out", a.out_dir, "Write requests.csv, steps.csv and summary.json here");
  sub->add_flag("--overwrite", a.overwrite, "Replace result files already in --out");
  sub->add_flag("--no-steps", a.no_steps, "Do not write steps.csv");
  sub->add_option("--max-requests", a.max_requests, "Stop reading the trace after this many requests")->check(CLI::NonNegativeNumber);
  sub->add_option("--format", a.trace_format, "Trace format (default: detected)");
  sub->add_option("--on-bad-row", a.on_bad_row, "error or skip");
  sub->callback([args] { run(*args); });
}};

}  // namespace
}  // namespace twin::cli
