#include "tools/twinserve/flag_registry.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "engine/core/scheduler_config.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/router.hpp"
#include "tools/twinserve/flag_checks.hpp"

namespace twin::cli {
namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Over 80 lines on purpose: the registry itself, one row per flag; split,
// the rows would no longer be read (and reviewed for drift) in one place.
std::vector<FlagSpec> make_table() {
  using F = FlagId;
  const CLI::Validator layout = int_range(1, 1024);
  // One row per concept, in FlagId order (flag_table() checks it); a data
  // literal, as long as its rows.
  return {
      {F::model, "--model", "Model: a bundled name or a config.json path / Hugging Face folder (`twinserve models list`)", {}},
      {F::weights, "--weights", "Folder of *.safetensors (f32, f16, bf16); default: random weights from --seed", {}},
      {F::hardware, "--hw,--hardware", "Hardware profile: a bundled name or a profile JSON path (`twinserve hw list`)", {}},
      {F::profile, "--profile", "A calibrated profile from `twinserve calibrate` (docs/calibrate.md)", {}},
      {F::seed, "--seed", "Seed of the command's random choices", CLI::NonNegativeNumber},
      {F::quiet, "--quiet,--no-progress", "No progress line on stderr (it shows only on a terminal)", {}},
      {F::overwrite, "--overwrite,--force", "Replace the output if it exists (without it, an existing output is an error)",
       {}},
      {F::jobs, "--jobs,-j", "Threads", {}},
      {F::slo, "--slo", "SLOs, e.g. 'ttft_p90<=2s,tpot_p99<=100ms'", {}},
      {F::tensor_parallel, "--tp,--tensor-parallel-size,--tp-size,--tp_size",
       "Tensor-parallel GPUs per pipeline stage (vLLM's; also -tp; SGLang's --tp-size, TensorRT-LLM's --tp_size)", layout},
      {F::pipeline_parallel, "--pp,--pipeline-parallel-size", "Pipeline stages (vLLM's; also -pp)", layout},
      {F::data_parallel, "--data-parallel-size,--dp",
       "vLLM's data parallelism (also -dp): ranks of --tp GPUs in one instance, each its own scheduler, limits and KV "
       "cache, behind vLLM's DP coordinator (docs/simulate.md)",
       layout},
      {F::enable_expert_parallel, "--enable-expert-parallel",
       "vLLM's flag: MoE experts split over the --data-parallel-size ranks, which then step in lockstep "
       "(docs/simulate.md)",
       {}},
      {F::expert_parallel, "--ep,--expert-parallel-size",
       "MoE expert parallelism: ep ranks of --tp GPUs per stage, attention data parallel over them, the experts split "
       "over them (docs/simulate.md)",
       layout},
      {F::dtype, "--dtype",
       "Weight and activation dtype: auto (the model's), fp32, fp16, bf16 or vLLM's spellings (float32, float, half, "
       "float16, bfloat16)",
       {}},
      {F::kv_cache_dtype, "--kv-cache-dtype",
       "KV cache dtype: auto (as the weights), the --dtype names, or fp8 (fp8_e4m3: 8-bit KV; docs/quantization.md)", {}},
      {F::quantization, "--quantization,-q", "Quantised linear weights, vLLM's names (docs/quantization.md)", {}},
      {F::max_model_len, "--max-model-len",
       "Prompt + output tokens at most (default: the model's context); auto (or -1, vLLM's): the largest the KV cache "
       "holds one request of",
       max_model_len_value(2, kMaxKnobCount)},
      {F::gpu_memory_utilization, "--gpu-memory-utilization",
       "Share of device memory for weights, activations and KV (vLLM's; default 0.9)", real_range(0, 1, true)},
      {F::num_gpu_blocks_override, "--num-gpu-blocks-override,--num-gpu-blocks",
       "KV blocks per replica, in place of the memory plan (vLLM's)", int_range(0, kMaxKnobCount)},
      {F::kv_offload_dram_gib, "--kv-offload-dram-gib",
       "KV tier in host memory, GiB per replica: evicted prefix blocks spill here and load back on a hit (0: none)",
       real_range(0, 1e9)},
      {F::kv_offload_ssd_gib, "--kv-offload-ssd-gib", "KV tier on local SSD below host memory, GiB per replica (0: none)",
       real_range(0, 1e9)},
      {F::scheduler, "--scheduler", "Scheduler preset (docs/engines.md): " + joined(replica_preset_names()), {}},
      {F::max_num_batched_tokens, "--max-num-batched-tokens,--chunk-size,--chunked-prefill-size,--max-num-tokens,--max_num_tokens",
       "Token budget per step (vLLM's; SGLang's --chunked-prefill-size, TensorRT-LLM's --max_num_tokens)",
       int_range(1, kMaxKnobCount)},
      {F::max_num_seqs, "--max-num-seqs,--max-running-requests,--max-batch-size,--max_batch_size",
       "Running requests per replica at most (vLLM's; SGLang's --max-running-requests, TensorRT-LLM's "
       "--max_batch_size)",
       int_range(1, kMaxKnobCount)},
      {F::router, "--router", "Router over the replicas: " + joined(router_names()), {}},
      {F::max_concurrency, "--max-concurrency",
       "At most N requests in flight (vLLM bench serve's): a request goes out at the later of its trace time and the "
       "instant one ends, and counts (TTFT) from then; with --request-rate inf a closed loop of N clients",
       int_range(1, kMaxInt32)},
      {F::request_rate, "--request-rate",
       "inf: every trace time is 0 (vLLM's spelling): all at once, or with --max-concurrency N each client sends its "
       "next request the instant its last one ends; to re-time a trace at a rate, use `trace convert --scale-rate`",
       CLI::IsMember({"inf"})},
      {F::sessions, "--sessions",
       "Closed-loop sessions: the rows of a session (session_id >= 0) are chat turns; turn k+1 goes out a think time "
       "after turn k's last token, its prompt turn k's prompt and output plus its new user tokens (docs/simulate.md, "
       "\"Clients\")",
       {}},
      {F::think_time_s, "--think-time-s",
       "With --sessions: seconds from a turn's last token to the next turn (default: the trace's gap between the two "
       "turns' times)",
       real_range(0, 9.0e9)},
      {F::asap, "--asap", "Send every request at t=0 instead of at the trace's times (throughput run)", {}},
      {F::result_format, "--result-format",
       "twin (default): requests.csv, steps.csv, summary.json; vllm: also vllm_result.json, the keys `vllm bench "
       "serve --save-result` writes",
       CLI::IsMember({"twin", "vllm"})},
      {F::speculative_config, "--speculative-config",
       "Speculative decoding, vLLM's JSON, e.g. '{\"method\":\"ngram\",\"num_speculative_tokens\":3}' "
       "(docs/speculative.md)",
       {}},
      {F::eos_token, "--eos-token",
       "A request stops when it samples this token (default: none; it runs to the trace's output length)",
       int_range(0, kMaxInt32)},
      {F::no_plots, "--no-plots", "Do not run gnuplot (the data and the plot script are still written)", {}},
      {F::no_steps, "--no-steps", "Do not write steps.csv", {}},
      {F::json, "--json", "Print one JSON object", {}},
      {F::measured, "--measured", "Runs measured elsewhere (docs/validate.md, docs/calibrate.md)", {}},
      // ---- energy (issue 44; docs/energy.md) ----
      {F::energy_price, "--energy-price",
       "Electricity price, $ per kWh: the run's energy cost in the summary (default: none)", real_range(0, 1.0e6)},
      {F::carbon_intensity, "--carbon-intensity",
       "Grid carbon intensity, g CO2 per kWh: the run's CO2 in the summary (default: none)", real_range(0, 1.0e6)},
      {F::max_power_kw, "--max-power-kw",
       "Power budget in kW: candidates whose GPUs' max board power (hardware profile max_w) exceeds it are pruned",
       real_range(1.0e-9, 1.0e9)},
      {F::power_budget_w, "--power-budget-w", "The power budget in watts (earlier spelling of --max-power-kw x 1000)",
       real_range(1.0e-6, 1.0e12)},
  };
}

}  // namespace

const std::vector<FlagSpec>& flag_table() {
  static const std::vector<FlagSpec> table = [] {
    std::vector<FlagSpec> t = make_table();
    if (t.size() != static_cast<std::size_t>(FlagId::count_)) throw Error("flag registry: a FlagId without its row");
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (static_cast<std::size_t>(t[i].id) != i) throw Error("flag registry: row " + t[i].names + " out of FlagId order");
    }
    return t;
  }();
  return table;
}

const FlagSpec& flag_spec(FlagId id) { return flag_table().at(static_cast<std::size_t>(id)); }

std::string flag_name(FlagId id) {
  // The longest long name: vLLM's spelling where it has one.
  std::string best;
  const std::string& names = flag_spec(id).names;
  for (std::size_t at = 0; at <= names.size();) {
    const std::size_t comma = std::min(names.find(',', at), names.size());
    const std::string name = names.substr(at, comma - at);
    if (name.rfind("--", 0) == 0 && name.size() > best.size()) best = name;
    at = comma + 1;
  }
  return best;
}

std::string flag_help(FlagId id, const std::string& use) {
  const std::string& help = flag_spec(id).help;
  return use.empty() ? help : help + "; " + use;
}

CLI::Option* add_switch(CLI::App& sub, FlagId id, bool& target, const std::string& use) {
  return sub.add_flag(flag_spec(id).names, target, flag_help(id, use));
}

CLI::Option* refuse_flag(CLI::App& sub, FlagId id, const std::string& why) {
  const std::string message = flag_name(id) + ": `" + sub.get_name() + "` does not take it: " + why;
  return sub
      .add_option_function<std::string>(
          flag_spec(id).names, [message](const std::string&) -> void { throw UsageError(message); },
          kRefusedFlagHelp + why)
      ->expected(0, 1);
}

}  // namespace twin::cli
