#include "validate/sim_serve.hpp"

#include <chrono>
#include <utility>

#include "sim/run.hpp"
#include "sim/simulator.hpp"

namespace twin {
namespace {

class VectorSource final : public RequestSource {
 public:
  explicit VectorSource(const std::vector<Request>& requests) : requests_(requests) {}
  bool next(Request& out) override {
    if (i_ == requests_.size()) return false;
    out = requests_[i_++];
    return true;
  }

 private:
  const std::vector<Request>& requests_;
  std::size_t i_ = 0;
};

class RecorderSink final : public RecordSink {
 public:
  explicit RecorderSink(RunRecorder& recorder) : recorder_(recorder) {}
  void on_request(const RequestRecord& r) override { recorder_.on_request(r); }
  void on_step(const StepRecord& s) override { recorder_.on_step(s); }

 private:
  RunRecorder& recorder_;
};

}  // namespace

RunRecords simulate_requests(const ClusterConfig& config, const std::vector<Request>& trace,
                             const std::filesystem::path& dir, bool overwrite, const std::string& cost_model,
                             std::shared_ptr<CostModel> model, const nlohmann::ordered_json& extra_echo) {
  const auto wall_start = std::chrono::steady_clock::now();
  Cluster cluster = build_cluster(config);
  if (model) {
    for (SimReplicaSpec& r : cluster.replicas) r.cost_model = model;
  }
  RunRecorder recorder(dir, overwrite);
  RecorderSink sink(recorder);
  SimOptions options;
  options.router = cluster.router;
  options.seed = config.seed;
  options.record_steps = true;
  SummaryContext context;
  context.num_replicas = static_cast<std::int32_t>(cluster.replicas.size());
  context.kv_blocks_capacity = cluster.groups.front().memory.num_blocks;
  context.config = config_echo(config, cluster);
  context.config["cost_model"] = cost_model;
  for (const auto& [key, value] : extra_echo.items()) context.config[key] = value;
  Simulator simulator(std::move(cluster.replicas), std::move(options));
  VectorSource source(trace);
  const SimStats stats = simulator.run(source, sink);
  context.simulated_time_s = to_seconds(stats.end_time);
  context.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return recorder.finish(context);
}

std::shared_ptr<CostModel> cost_model_of(const ClusterConfig& config) {
  return build_cluster(config).replicas.front().cost_model;
}

}  // namespace twin
