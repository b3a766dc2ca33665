#include "validate/sim_serve.hpp"

#include <chrono>
#include <utility>

#include "sim/run.hpp"
#include "sim/simulator.hpp"

namespace twin {
RunRecords simulate_requests(const ClusterConfig& config, const std::vector<Request>& trace,
                             const std::filesystem::path& dir, bool overwrite, const std::string& cost_model,
                             std::shared_ptr<CostModel> model, const nlohmann::ordered_json& extra_echo,
                             const std::function<bool()>& stop) {
  const auto wall_start = std::chrono::steady_clock::now();
  Cluster cluster = build_cluster(config);
  if (model) {
    for (SimReplicaSpec& r : cluster.replicas) r.cost_model = model;
  }
  RunRecorder recorder(dir, overwrite);
  // Served as simulate serves it (lockstep DP ranks, disaggregated pools,
  // the router's refresh): otherwise a replay serves another deployment.
  SimOptions options = cluster_sim_options(config, cluster);
  options.record_steps = true;
  WindowOptions window = cluster_window_options(config);
  SummaryContext context;
  context.num_replicas = static_cast<std::int32_t>(cluster.replicas.size());
  context.kv_blocks_capacity = cluster.groups.front().memory.num_blocks;
  context.config = config_echo(config, cluster);
  context.config["cost_model"] = cost_model;
  for (const auto& [key, value] : extra_echo.items()) context.config[key] = value;
  Simulator simulator(std::move(cluster.replicas), std::move(options), cluster.transfers, std::move(window));
  if (stop) simulator.set_stop(stop);
  VectorSource source(trace);
  const SimStats stats = simulator.run(source, recorder);
  context.simulated_time_s = to_seconds(stats.end_time);
  context.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (stats.stopped) {  // as simulate marks it
    context.config["interrupted"] = true;
    context.config["interrupted_requests"] = stats.interrupted;
  }
  RunRecords records = recorder.finish(context);
  records.interrupted = stats.stopped;
  return records;
}

std::shared_ptr<CostModel> cost_model_of(const ClusterConfig& config) {
  return build_cluster(config).replicas.front().cost_model;
}

}  // namespace twin
