#pragma once
// Speculative decoding as `run` and `simulate` take it: vLLM's
// --speculative-config JSON (method, num_speculative_tokens, model,
// prompt_lookup_max / prompt_lookup_min), plus the simulator's acceptance
// keys. docs/speculative.md describes every key.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "models/model_desc.hpp"

namespace twin {

// eagle (vLLM's name) is the simulator's only: EAGLE's head, one decoder
// layer of the target's shape over the target's features, read out by the
// target's LM head; the engine has no EAGLE weights to run. medusa (vLLM's
// name), the simulator's only too: Medusa-1's heads, one per proposed
// position, each a residual block of the target's hidden size and an LM
// head of its own, all run once per step on the target's last hidden state
// (models/step_ops.hpp, medusa_heads_ops).
enum class SpeculativeMethod { ngram, draft_model, eagle, medusa };

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::ngram;
  std::int32_t num_speculative_tokens = 0;  // k, 1..64
  std::string model;                        // draft_model: the draft (name or config path); eagle: its head's, optional
  std::int32_t prompt_lookup_max = 4;       // ngram: longest suffix looked up
  std::int32_t prompt_lookup_min = 1;       // ngram: shortest
  // Simulator only: how many proposals the target accepts. One of
  //   acceptance_rate: the chance each proposal is accepted, given the ones
  //     before it were (per position, as in Leviathan et al.'s alpha);
  //   acceptance_length: mean tokens per verification step including the
  //     target's own (EAGLE's and Medusa's "average acceptance length" tau);
  //   acceptance_from: an engine run's steps.csv, whose recorded counts give
  //     the rate (and, for a replay of that run, the exact counts).
  double acceptance_rate = -1;    // -1: not given
  double acceptance_length = -1;  // -1: not given
  std::string acceptance_from;
  // Simulator only: tokens the target verifies per step for a seq with
  // proposals, the nodes of a draft tree (SGLang's
  // speculative_num_draft_tokens; EAGLE-1's default tree 25, Medusa's
  // mc_sim_7b_63 63); num_speculative_tokens is then the tree's depth. 0:
  // a chain of num_speculative_tokens. Acceptance stays the accepted path's.
  std::int32_t num_draft_tokens = 0;
  // Simulator only: a calibrated profile of the draft model (else the
  // draft is priced by the roofline of the group's hardware).
  std::string draft_profile;
};

std::string_view speculative_method_name(SpeculativeMethod m);

// Parses the JSON object text; UsageError naming `origin` (the flag or file)
// and the key for bad JSON, an unknown key, a wrong type or a value out of
// range, a key the method does not take, or a missing required key.
SpeculativeConfig parse_speculative_config(std::string_view text, const std::string& origin);
SpeculativeConfig speculative_config_from_json(const nlohmann::json& json, const std::string& origin);
// The config as JSON in the input format (summary.json's config echo).
nlohmann::ordered_json speculative_config_json(const SpeculativeConfig& config);

// EAGLE's head for a target (method eagle without a model): one dense
// decoder layer of the target's shape, with the target's vocabulary (it
// reads the target's embedding and LM head; EAGLE's fc from the feature and
// token pair to the hidden size is left out, a 2h x h GEMM beside the
// layer's). Named after the target.
ModelDesc eagle_head(const ModelDesc& target);

// The per-position acceptance rate alpha whose expected tokens per
// verification step, 1 + alpha + ... + alpha^k, equals `length` (1..k+1).
double acceptance_rate_for_length(double length, std::int32_t k);
// Expected tokens per verification step at per-position rate alpha.
double expected_tokens_per_step(double alpha, std::int32_t k);

}  // namespace twin
