#include "sim/run.hpp"

#include "sim/energy_context.hpp"
#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "base/error.hpp"
#include "metrics/collector.hpp"
#include "metrics/output_dir.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/result_files.hpp"
#include "metrics/result_sink.hpp"
#include "metrics/slo.hpp"
#include "metrics/step_csv.hpp"
#include "metrics/summary_json.hpp"
#include "metrics/vllm_detailed.hpp"
#include "metrics/vllm_result.hpp"
#include "sim/energy_context.hpp"
#include "sim/kv_tier_report.hpp"

namespace twin {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string describe_cluster(const Cluster& cluster) {
  std::ostringstream out;
  for (const GroupPlan& g : cluster.groups) {
    out << g.config.count << " x " << (g.replica.role == ReplicaRole::mixed ? "" : std::string(replica_role_name(g.replica.role)) + " ")
        << g.model.name << " (" << dtype_name(g.dtype)
        << (g.precision.quantized() ? ", " + std::string(quant_method_name(g.precision.quant.method)) + " " +
                                          std::string(g.precision.quant.kernel)
                                    : std::string())
        << ", KV " << dtype_name(g.kv_dtype) << ") on " << g.hardware.name << ", tp=" << g.layout.tp << " pp=" << g.layout.pp
        << (g.layout.ep > 1 ? " ep=" + std::to_string(g.layout.ep) : std::string())
        << (g.config.dp > 1 ? " dp=" + std::to_string(g.config.dp) + (g.config.enable_expert_parallel ? " lockstep" : "")
                            : std::string())
        << ", " << g.memory.num_blocks << " KV blocks of " << g.replica.kv.block_size
        << (g.config.dp > 1 ? " tokens per rank" : " tokens per replica")
        << (g.memory.overridden ? " (override)" : "") << ", preset " << g.replica.scheduler.preset << "\n";
  }
  return out.str();
}

nlohmann::ordered_json config_echo(const ClusterConfig& config, const Cluster& cluster) {
  nlohmann::ordered_json echo = cluster_config_json(config);
  nlohmann::ordered_json resolved = nlohmann::ordered_json::array();
  for (const GroupPlan& g : cluster.groups) {
    nlohmann::ordered_json j;
    j["model"] = g.model.name;
    j["hardware"] = g.hardware.name;
    j["dtype"] = std::string(dtype_name(g.dtype));
    j["kv_dtype"] = std::string(dtype_name(g.kv_dtype));
    j["quantization"] = std::string(quant_method_name(g.precision.quant.method));
    if (g.precision.quantized()) j["quantization_kernel"] = std::string(g.precision.quant.kernel);
    j["tp"] = g.layout.tp;
    j["pp"] = g.layout.pp;
    j["ep"] = g.layout.ep;
    j["cost_model"] = !g.config.replay.empty() ? "replay" : (!g.config.profile.empty() ? "calibrated" : "roofline");
    j["replicas"] = g.config.count;
    if (g.replica.role != ReplicaRole::mixed) j["role"] = std::string(replica_role_name(g.replica.role));
    j["first_replica"] = g.first_replica;
    j["scheduler_preset"] = g.replica.scheduler.preset;
    j["max_num_batched_tokens"] = effective_token_budget(g.replica.scheduler);
    j["max_num_seqs"] = g.replica.scheduler.max_num_seqs;
    j["max_model_len"] = g.replica.scheduler.max_model_len;
    j["enable_chunked_prefill"] = g.replica.scheduler.enable_chunked_prefill;
    j["block_size"] = g.replica.kv.block_size;
    j["enable_prefix_caching"] = g.replica.kv.enable_prefix_caching;
    j["async_scheduling"] = g.replica.scheduler.async_scheduling;
    j["num_gpu_blocks"] = g.memory.num_blocks;
    j["num_gpu_blocks_overridden"] = g.memory.overridden;
    j["kv_block_bytes_per_gpu"] = g.memory.block_bytes;
    j["weight_bytes_per_gpu"] = g.memory.weight_bytes;
    j["activation_reserve_bytes_per_gpu"] = g.memory.activation_bytes;
    j["runtime_reserve_bytes_per_gpu"] = g.memory.runtime_bytes;
    j["collective_reserve_bytes_per_gpu"] = g.memory.collective_bytes;
    j["cuda_graph_reserve_bytes_per_gpu"] = g.memory.cuda_graph_bytes;
    j["device_memory_bytes"] = g.memory.device_bytes;
    j["usable_bytes_per_gpu"] = g.memory.usable_bytes;
    resolved.push_back(std::move(j));
  }
  // The groups' cost model where they share one, else "mixed" (each
  // resolved group names its own).
  std::string cost_model;
  for (const nlohmann::ordered_json& g : resolved) {
    const std::string c = g["cost_model"].get<std::string>();
    cost_model = cost_model.empty() || cost_model == c ? c : "mixed";
  }
  echo["resolved_groups"] = std::move(resolved);
  echo["cost_model"] = cost_model;
  return echo;
}

namespace {

// vllm_result.json: vLLM's summary keys, then its per-request lists in the
// order the requests were sent (arrival; records end in another order).
void write_vllm_file(OutputDir& dir, const std::string& out_dir, const Summary& summary, const std::string& model,
                     std::vector<std::pair<Time, VllmRequestEntry>> detailed) {
  std::stable_sort(detailed.begin(), detailed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<VllmRequestEntry> entries;
  entries.reserve(detailed.size());
  for (auto& [arrival, entry] : detailed) entries.push_back(std::move(entry));
  nlohmann::ordered_json vllm = vllm_result_json(summary, {"twinserve-simulate", model, vllm_result_date()});
  add_vllm_detailed(vllm, entries);
  std::ofstream file = dir.open("vllm_result.json");
  file << vllm.dump(2) << '\n';
  if (!file) throw Error(out_dir + "/vllm_result.json: write failed");
}

}  // namespace

RunResult run_simulation(const ClusterConfig& config, RequestSource& source, const RunOutputs& outputs,
                         const nlohmann::ordered_json& extra_echo) {
  const auto wall_start = std::chrono::steady_clock::now();
  const std::vector<Slo> slos = parse_slos(config.slos);
  Cluster cluster = build_cluster(config);

  std::optional<OutputDir> dir;
  std::optional<ResultFiles> csv;
  if (!outputs.out_dir.empty()) {
    std::vector<std::string> files = csv_result_names(outputs.files);
    files.push_back("summary.json");
    if (outputs.vllm_result) files.push_back("vllm_result.json");
    dir.emplace(outputs.out_dir, outputs.overwrite, files);
    ResultColumns columns;
    columns.transfer = cluster.disaggregated();
    for (const SimReplicaSpec& r : cluster.replicas) {
      columns.speculative = columns.speculative || r.config.scheduler.num_speculative_tokens > 0;
    }
    // Tier columns only when the run has tiers (the cluster's, one list).
    for (const GroupPlan& g : cluster.groups) {
      if (!g.tiers || !columns.tiers.empty()) continue;
      for (const KvTierLink& t : g.tiers->tiers()) columns.tiers.push_back(t.name);
    }
    columns.energy = energy_context(cluster).unknown.empty();
    csv.emplace(*dir, outputs.files, columns);
  }
  RequestCsvWriter* request_writer = csv ? csv->requests() : nullptr;
  StepCsvWriter* step_writer = csv ? csv->steps() : nullptr;

  MetricsCollector collector(CollectorOptions{outputs.exact_percentile_requests, slos});
  std::int64_t ended = 0;  // requests ended, for the progress callback
  // vllm_result.json's per-request lists (vLLM's --save-detailed), kept in
  // memory only when that file is asked for.
  std::vector<std::pair<Time, VllmRequestEntry>> detailed;
  ResultSink::RequestListener listen;
  if (outputs.progress || outputs.vllm_result || outputs.on_request) {
    listen = [&](const RequestRecord& r) {
      ++ended;
      if (outputs.vllm_result) detailed.emplace_back(r.arrival, vllm_request_entry(r));
      if (outputs.on_request) outputs.on_request(r);
    };
  }
  const std::uint64_t keep_every = static_cast<std::uint64_t>(std::max<std::int64_t>(1, outputs.files.steps.every));
  ResultSink::StepListener step_listen;
  const bool listen_steps = outputs.on_step && !outputs.files.steps.none();
  if (listen_steps) {
    step_listen = [&](const StepRecord& s) {
      if (keeps_step(s.step_id, keep_every)) outputs.on_step(s);
    };
  }
  ResultSink sink(collector, request_writer, step_writer, std::move(listen), std::move(step_listen));
  SimOptions options;
  options.router = cluster.router;
  options.disagg = cluster.disagg;
  options.lockstep = cluster.lockstep;
  options.seed = config.seed;
  // Steps are counted in the replicas' tallies; records only for steps.csv.
  options.record_steps = step_writer != nullptr || outputs.steps_for_root || listen_steps;
  options.record_steps_every = static_cast<std::uint64_t>(std::max<std::int64_t>(1, outputs.files.steps.every));
  if (outputs.progress) {
    options.progress = [&](Time now, std::int64_t arrivals) { outputs.progress({to_seconds(now), arrivals, ended}); };
  }
  WindowOptions window;
  check_router_refresh(config.router_refresh_s, "router_refresh_s");
  window.router_refresh = from_seconds(config.router_refresh_s);
  window.jobs = outputs.jobs;
  window.ranks = outputs.ranks;
  // Each further thread prices with a cluster of its own (cost models keep scratch state).
  window.more_specs = [&config] { return build_cluster(config).replicas; };
  EnergyContext energy = energy_context(cluster);
  Simulator simulator(std::move(cluster.replicas), std::move(options), cluster.transfers, std::move(window));
  if (outputs.stop) simulator.set_stop(outputs.stop);
  RunResult result;
  result.stats = simulator.run(source, sink);
  if (outputs.progress) outputs.progress({to_seconds(result.stats.end_time), result.stats.arrivals, ended});

  result.wall_time_s = seconds_since(wall_start);
  SummaryContext context;
  context.slos = slos;
  context.num_replicas = simulator.num_replicas();
  context.kv_blocks_capacity = cluster.groups.front().memory.num_blocks;
  context.disaggregated = cluster.disaggregated();
  context.simulated_time_s = to_seconds(result.stats.end_time);
  context.wall_time_s = result.wall_time_s;
  energy.end = result.stats.end_time;
  energy.energy_price_per_kwh = outputs.energy_price_per_kwh;
  energy.carbon_g_per_kwh = outputs.carbon_g_per_kwh;
  context.energy = std::move(energy);
  context.config = config_echo(config, cluster);
  for (const auto& [key, value] : extra_echo.items()) context.config[key] = value;
  if (result.stats.stopped) {  // as the engine's run marks it
    context.config["interrupted"] = true;
    context.config["interrupted_requests"] = result.stats.interrupted;
  }
  result.summary = collector.summarize(context);
  summarize_kv_tiers(result.summary, cluster, simulator);

  if (dir) {
    csv->close();
    result.csv_bytes = csv->bytes_written();
    std::ofstream summary_file = dir->open("summary.json");
    write_summary_json(summary_file, result.summary);
    if (!summary_file) throw Error(outputs.out_dir + "/summary.json: write failed");
    if (outputs.vllm_result) {
      write_vllm_file(*dir, outputs.out_dir, result.summary, cluster.groups.front().model.name, std::move(detailed));
    }
  }
  return result;
}

}  // namespace twin
