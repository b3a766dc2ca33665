#include "sim/run.hpp"

#include "sim/energy_context.hpp"
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <sstream>

#include "base/error.hpp"
#include "metrics/collector.hpp"
#include "metrics/config_echo.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/result_files.hpp"
#include "metrics/result_sink.hpp"
#include "metrics/run_writer.hpp"
#include "metrics/slo.hpp"
#include "metrics/step_csv.hpp"
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
    echo_replica(g.replica, g.memory.num_blocks, j);
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

// The CSVs' columns for what the cluster has.
ResultColumns result_columns(const Cluster& cluster) {
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
  return columns;
}

}  // namespace

SimOptions cluster_sim_options(const ClusterConfig& config, const Cluster& cluster) {
  SimOptions options;
  options.router = cluster.router;
  options.disagg = cluster.disagg;
  options.lockstep = cluster.lockstep;
  options.seed = config.seed;
  return options;
}

WindowOptions cluster_window_options(const ClusterConfig& config) {
  check_router_refresh(config.router_refresh_s, "router_refresh_s");
  WindowOptions window;
  window.router_refresh = from_seconds(config.router_refresh_s);
  return window;
}

RunResult run_simulation(const ClusterConfig& config, RequestSource& source, const RunOutputs& outputs,
                         const nlohmann::ordered_json& extra_echo) {
  const auto wall_start = std::chrono::steady_clock::now();
  const std::vector<Slo> slos = parse_slos(config.slos);
  Cluster cluster = build_cluster(config);

  RunWriter writer({outputs.out_dir, outputs.overwrite, outputs.files, outputs.vllm_result});
  if (writer.writes()) writer.open(result_columns(cluster));
  RequestCsvWriter* request_writer = writer.requests();
  StepCsvWriter* step_writer = writer.steps();

  MetricsCollector collector(CollectorOptions{outputs.exact_percentile_requests, slos});
  std::int64_t ended = 0;  // requests ended, for the progress callback
  ResultSink::RequestListener listen;
  if (outputs.progress || writer.keeps_requests() || outputs.on_request) {
    listen = [&](const RequestRecord& r) {
      ++ended;
      writer.keep(r);  // vllm_result.json's per-request lists (vLLM's --save-detailed)
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
  SimOptions options = cluster_sim_options(config, cluster);
  // Steps are counted in the replicas' tallies; records only for steps.csv.
  options.record_steps = step_writer != nullptr || outputs.steps_for_root || listen_steps;
  options.record_steps_every = static_cast<std::uint64_t>(std::max<std::int64_t>(1, outputs.files.steps.every));
  if (outputs.progress) {
    options.progress = [&](Time now, std::int64_t arrivals) { outputs.progress({to_seconds(now), arrivals, ended}); };
  }
  WindowOptions window = cluster_window_options(config);
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
  echo_stop(result.stats.stopped, result.stats.interrupted, context.config);
  result.summary = collector.summarize(context);
  summarize_kv_tiers(result.summary, cluster, simulator);

  result.csv_bytes =
      writer.finish(result.summary, {"twinserve-simulate", cluster.groups.front().model.name, vllm_result_date()});
  return result;
}

}  // namespace twin
