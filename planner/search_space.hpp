#pragma once
// What `twinserve plan` searches: the cartesian product of hardware, TP, PP,
// EP, prefill/decode split, KV tier size, scheduler preset and knobs, and
// router, for one model. From flags or a
// JSON file (docs/plan.md) where every key is checked.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cluster_config.hpp"

namespace twin {

// max_model_len "auto" (vLLM's -1) in a search space and a candidate: each
// candidate serves the largest max_model_len its KV cache holds one request
// of (sim/cluster_config.hpp, max_model_len_auto), at most the model's context.
inline constexpr std::int32_t kMaxModelLenAuto = -1;

struct SearchSpace {
  std::string model = "llama-3.1-8b";
  std::string dtype;  // empty: the model's
  // Precision of every candidate (vLLM's --quantization, --kv-cache-dtype;
  // empty: none / as the weights): an fp8 capacity plan.
  std::string quantization, kv_dtype;
  std::vector<std::string> hardware = {"h100-80gb", "h200", "a100-80gb"};
  std::vector<std::int32_t> tp = {1, 2, 4, 8};
  std::vector<std::int32_t> pp = {1};
  std::vector<std::int32_t> ep = {1};  // expert parallel ranks (MoE models only)
  // Prefill/decode splits: a deployment unit of P prefill and D decode
  // replicas ({0, 0}: co-located replicas, no pools); the plan sizes the
  // number of units.
  std::vector<std::pair<std::int32_t, std::int32_t>> pd = {{0, 0}};
  std::vector<double> kv_dram_gib = {0};  // host DRAM KV tier per replica (0: none)
  std::vector<std::string> presets = {"vllm"};
  std::vector<std::int32_t> max_num_batched_tokens;  // empty: the preset's
  std::vector<std::int32_t> max_num_seqs;            // empty: the preset's
  std::int32_t max_model_len = 0;                    // 0: the model's context; kMaxModelLenAuto: what fits
  std::vector<std::string> routers = {"least_outstanding"};
  std::optional<std::int32_t> max_gpus;
  std::optional<double> budget;  // $ per hour
  // Issue 44: at most this many watts provisioned (every GPU at its max
  // board power, the hardware profile's power.max_w).
  std::optional<double> power_budget_w;
};

// One point of the space: a replica configuration and the router.
struct Candidate {
  std::int32_t index = 0;  // position in enumeration order
  std::string model, dtype, hardware, preset, router;
  std::string quantization, kv_dtype;  // empty: none / as the weights
  std::int32_t tp = 1, pp = 1, ep = 1;
  std::int32_t prefill = 0, decode = 0;     // replicas of each pool per unit; 0, 0: co-located
  double kv_dram_gib = 0;                   // host DRAM KV tier per replica; 0: none
  bool disaggregated() const { return prefill > 0; }
  std::int32_t replicas_per_unit() const { return disaggregated() ? prefill + decode : 1; }
  std::int32_t max_num_batched_tokens = 0;  // 0: the preset's
  std::int32_t max_num_seqs = 0;            // 0: the preset's
  std::int32_t max_model_len = 0;           // 0: the model's context; kMaxModelLenAuto: what fits
};

// Applies the keys of a search file over `space`. Throws UsageError naming
// `origin` and the key for an unknown key or a wrong type (with the known keys).
void apply_search_json(SearchSpace& space, const nlohmann::json& json, const std::string& origin);
void load_search_file(SearchSpace& space, const std::string& path);

// Checks every name (model, hardware, presets, routers) and value (UsageError
// listing the known names) so that pruning only ever means "cannot run".
void check_search_space(const SearchSpace& space);

// Hardware-major, then tp, pp, ep, prefill/decode split, KV tier size,
// preset, chunk size, max seqs, router.
// "P:D" (P prefill and D decode replicas per unit, both >= 1) or "0" / "none"
// (co-located); UsageError otherwise, naming `what`.
std::pair<std::int32_t, std::int32_t> parse_pd_split(const std::string& text, const std::string& what);
std::vector<Candidate> enumerate_candidates(const SearchSpace& space);

// "h100-80gb tp=2 pp=1 vllm mbt=2048 seqs=256 least_outstanding" (knobs only when set;
// "ep=4", "pd=1:2", "dram=64GiB" likewise).
std::string candidate_label(const Candidate& c);
nlohmann::ordered_json candidate_json(const Candidate& c);

// The cluster config of `replicas` replicas of the candidate; of a
// disaggregated candidate, `replicas` units of its prefill and decode pools.
ClusterConfig candidate_config(const Candidate& c, std::int32_t replicas, const std::string& slos, std::uint64_t seed);

}  // namespace twin
