#include "models/speculative_config.hpp"

#include <cmath>
#include <string>

#include "base/error.hpp"
#include "models/json_fields.hpp"

namespace twin {
namespace {

constexpr std::int64_t kMaxK = 64;  // the core's bound on num_speculative_tokens
constexpr std::int64_t kMaxTreeTokens = 512;  // a draft tree's nodes

const char* const kKeys[] = {"method",          "num_speculative_tokens", "model",
                             "prompt_lookup_max", "prompt_lookup_min",    "acceptance_rate",
                             "acceptance_length", "acceptance_from",      "draft_profile",
                             "num_draft_tokens"};

std::string known_keys() {
  std::string out;
  for (const char* k : kKeys) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

[[noreturn]] void fail(const std::string& origin, const std::string& key, const std::string& what) {
  throw UsageError(origin + ": key '" + key + "': " + what);
}

std::int32_t int_in(const nlohmann::json& j, const char* key, const std::string& origin, std::int64_t lo,
                    std::int64_t hi) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer()) fail(origin, key, "expected an integer, got " + json_excerpt(v));
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi) fail(origin, key, std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<std::int32_t>(x);
}

double real_in(const nlohmann::json& j, const char* key, const std::string& origin, double lo, double hi) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number()) fail(origin, key, "expected a number, got " + json_excerpt(v));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) fail(origin, key, json_excerpt(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

std::string text(const nlohmann::json& j, const char* key, const std::string& origin) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_string() || v.get<std::string>().empty()) fail(origin, key, "expected a non-empty string, got " + json_excerpt(v));
  return v.get<std::string>();
}

}  // namespace

ModelDesc eagle_head(const ModelDesc& target) {
  ModelDesc head = target;
  head.name = target.name + "-eagle-head";
  head.hf_id.clear();
  head.num_hidden_layers = 1;
  head.num_local_experts = 0;  // a dense layer
  head.num_experts_per_tok = 0;
  head.moe_intermediate_size = 0;
  head.n_shared_experts = 0;
  head.first_k_dense_replace = 0;
  // One full-attention layer with a dense MLP, whatever the target's layer mix.
  if (!head.layer_attention.empty()) head.sliding_window = 0;  // the window was its local layers'
  head.layer_attention.clear();
  head.layer_mlp.clear();
  head.attention_chunk_size = 0;
  return head;
}

std::string_view speculative_method_name(SpeculativeMethod m) {
  switch (m) {
    case SpeculativeMethod::ngram: return "ngram";
    case SpeculativeMethod::draft_model: return "draft_model";
    case SpeculativeMethod::eagle: return "eagle";
    case SpeculativeMethod::medusa: return "medusa";
  }
  return "?";
}

SpeculativeConfig parse_speculative_config(std::string_view json_text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = parse_json_guarded(json_text, origin);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(std::string(e.what()) + " (expected a JSON object such as "
                     "'{\"method\":\"ngram\",\"num_speculative_tokens\":3}')");
  }
  return speculative_config_from_json(j, origin);
}

SpeculativeConfig speculative_config_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw UsageError(origin + ": expected a JSON object, got " + json_excerpt(j));
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) throw UsageError(origin + ": unknown key '" + excerpt(key) + "'; known keys: " + known_keys());
  }
  SpeculativeConfig c;
  if (!j.contains("method")) fail(origin, "method", "missing: ngram, draft_model, eagle or medusa");
  const std::string method = text(j, "method", origin);
  if (method == "ngram") {
    c.method = SpeculativeMethod::ngram;
  } else if (method == "draft_model") {
    c.method = SpeculativeMethod::draft_model;
  } else if (method == "eagle") {
    c.method = SpeculativeMethod::eagle;
  } else if (method == "medusa") {
    c.method = SpeculativeMethod::medusa;
  } else {
    fail(origin, "method", "unknown method '" + excerpt(method) + "': ngram, draft_model, eagle or medusa");
  }
  if (!j.contains("num_speculative_tokens")) fail(origin, "num_speculative_tokens", "missing: 1 to 64");
  c.num_speculative_tokens = int_in(j, "num_speculative_tokens", origin, 1, kMaxK);
  if (c.method != SpeculativeMethod::ngram) {
    if (c.method == SpeculativeMethod::draft_model && !j.contains("model")) {
      fail(origin, "model", "missing: the draft model's name or config path");
    }
    if (c.method == SpeculativeMethod::medusa) {
      // vLLM's "model" is the heads' checkpoint; here the heads are sized
      // from the target (medusa_heads_ops), so there is nothing to name.
      if (j.contains("model")) fail(origin, "model", "method medusa sizes its heads from the target and takes no model");
      if (j.contains("draft_profile")) fail(origin, "draft_profile", "method medusa has no draft model to profile");
    }
    // eagle: vLLM's "model" is the head's checkpoint; here an optional
    // descriptor of the head (default: one layer of the target's shape).
    if (j.contains("model")) c.model = text(j, "model", origin);
    for (const char* k : {"prompt_lookup_max", "prompt_lookup_min"}) {
      if (j.contains(k)) fail(origin, k, "applies to method ngram only");
    }
  } else {
    if (j.contains("model")) fail(origin, "model", "method ngram takes no draft model");
    if (j.contains("draft_profile")) fail(origin, "draft_profile", "method ngram has no draft model to profile");
    if (j.contains("prompt_lookup_max")) c.prompt_lookup_max = int_in(j, "prompt_lookup_max", origin, 1, 1024);
    if (j.contains("prompt_lookup_min")) c.prompt_lookup_min = int_in(j, "prompt_lookup_min", origin, 1, 1024);
    if (c.prompt_lookup_min > c.prompt_lookup_max) {
      fail(origin, "prompt_lookup_min", std::to_string(c.prompt_lookup_min) + " exceeds prompt_lookup_max " +
                                            std::to_string(c.prompt_lookup_max));
    }
  }
  int given = 0;
  if (j.contains("acceptance_rate")) {
    c.acceptance_rate = real_in(j, "acceptance_rate", origin, 0.0, 1.0);
    ++given;
  }
  if (j.contains("acceptance_length")) {
    c.acceptance_length = real_in(j, "acceptance_length", origin, 1.0, 1.0 + c.num_speculative_tokens);
    ++given;
  }
  if (j.contains("acceptance_from")) {
    c.acceptance_from = text(j, "acceptance_from", origin);
    ++given;
  }
  if (given > 1) {
    fail(origin, "acceptance_rate", "give one of acceptance_rate, acceptance_length and acceptance_from");
  }
  if (j.contains("draft_profile")) c.draft_profile = text(j, "draft_profile", origin);
  if (j.contains("num_draft_tokens")) {
    c.num_draft_tokens = int_in(j, "num_draft_tokens", origin, c.num_speculative_tokens, kMaxTreeTokens);
  }
  return c;
}

nlohmann::ordered_json speculative_config_json(const SpeculativeConfig& c) {
  nlohmann::ordered_json j;
  j["method"] = std::string(speculative_method_name(c.method));
  j["num_speculative_tokens"] = c.num_speculative_tokens;
  if (c.method != SpeculativeMethod::ngram) {
    if (!c.model.empty()) j["model"] = c.model;
  } else {
    j["prompt_lookup_max"] = c.prompt_lookup_max;
    j["prompt_lookup_min"] = c.prompt_lookup_min;
  }
  if (c.acceptance_rate >= 0) j["acceptance_rate"] = c.acceptance_rate;
  if (c.acceptance_length >= 0) j["acceptance_length"] = c.acceptance_length;
  if (!c.acceptance_from.empty()) j["acceptance_from"] = c.acceptance_from;
  if (!c.draft_profile.empty()) j["draft_profile"] = c.draft_profile;
  if (c.num_draft_tokens > 0) j["num_draft_tokens"] = c.num_draft_tokens;
  return j;
}

double expected_tokens_per_step(double alpha, std::int32_t k) {
  double tokens = 1, term = 1;
  for (std::int32_t i = 0; i < k; ++i) {
    term *= alpha;
    tokens += term;
  }
  return tokens;
}

double acceptance_rate_for_length(double length, std::int32_t k) {
  if (!(length >= 1.0 && length <= 1.0 + k)) {
    throw UsageError("acceptance_length " + std::to_string(length) + " is outside [1, " + std::to_string(1 + k) + "]");
  }
  // expected_tokens_per_step rises with alpha: bisection.
  double lo = 0, hi = 1;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (expected_tokens_per_step(mid, k) < length ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace twin
