#pragma once
// What `twinserve plan` searches: the cartesian product of hardware, TP, PP,
// scheduler preset and knobs, and router, for one model. From flags or a
// JSON file (docs/plan.md) where every key is checked.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cluster_config.hpp"

namespace twin {

struct SearchSpace {
  std::string model = "llama-3.1-8b";
  std::string dtype;  // empty: the model's
  std::vector<std::string> hardware = {"h100-80gb", "h200", "a100-80gb"};
  std::vector<std::int32_t> tp = {1, 2, 4, 8};
  std::vector<std::int32_t> pp = {1};
  std::vector<std::string> presets = {"vllm"};
  std::vector<std::int32_t> max_num_batched_tokens;  // empty: the preset's
  std::vector<std::int32_t> max_num_seqs;            // empty: the preset's
  std::int32_t max_model_len = 0;                    // 0: the model's context
  std::vector<std::string> routers = {"least_outstanding"};
  std::optional<std::int32_t> max_gpus;
  std::optional<double> budget;  // $ per hour
};

// One point of the space: a replica configuration and the router.
struct Candidate {
  std::int32_t index = 0;  // position in enumeration order
  std::string model, dtype, hardware, preset, router;
  std::int32_t tp = 1, pp = 1;
  std::int32_t max_num_batched_tokens = 0;  // 0: the preset's
  std::int32_t max_num_seqs = 0;            // 0: the preset's
  std::int32_t max_model_len = 0;           // 0: the model's context
};

// Applies the keys of a search file over `space`. Throws UsageError naming
// `origin` and the key for an unknown key or a wrong type (with the known keys).
void apply_search_json(SearchSpace& space, const nlohmann::json& json, const std::string& origin);
void load_search_file(SearchSpace& space, const std::string& path);

// Checks every name (model, hardware, presets, routers) and value (UsageError
// listing the known names) so that pruning only ever means "cannot run".
void check_search_space(const SearchSpace& space);

// Hardware-major, then tp, pp, preset, chunk size, max seqs, router.
std::vector<Candidate> enumerate_candidates(const SearchSpace& space);

// "h100-80gb tp=2 pp=1 vllm mbt=2048 seqs=256 least_outstanding" (knobs only when set).
std::string candidate_label(const Candidate& c);
nlohmann::ordered_json candidate_json(const Candidate& c);

// The cluster config of `replicas` replicas of the candidate.
ClusterConfig candidate_config(const Candidate& c, std::int32_t replicas, const std::string& slos, std::uint64_t seed);

}  // namespace twin
