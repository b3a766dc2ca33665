#pragma once
// The simulator side of a validation: the same requests (already on the
// engine's timeline) through a one-replica cluster, with the cluster's own
// cost model or one put in its place (the replay, wrapped for pricing).
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/request.hpp"
#include "sim/cluster.hpp"
#include "sim/cluster_config.hpp"
#include "sim/cost_model.hpp"
#include "validate/run_recorder.hpp"

namespace twin {

// Builds the cluster of `config`, replaces every replica's cost model with
// `model` when given, simulates `trace` and writes dir's result files (none
// when dir is empty). `cost_model` labels the run in summary.json's config.
// `stop` (may be empty) is asked at every turn of the loop: true ends the
// run as simulate's Ctrl-C does (requests in flight "interrupted", the
// files whole, summary.json's config "interrupted": true) and the records
// say interrupted.
RunRecords simulate_requests(const ClusterConfig& config, const std::vector<Request>& trace,
                             const std::filesystem::path& dir, bool overwrite, const std::string& cost_model,
                             std::shared_ptr<CostModel> model = nullptr,
                             const nlohmann::ordered_json& extra_echo = nlohmann::ordered_json::object(),
                             const std::function<bool()>& stop = {});

// The first replica's cost model of the cluster `config` describes.
std::shared_ptr<CostModel> cost_model_of(const ClusterConfig& config);

}  // namespace twin
