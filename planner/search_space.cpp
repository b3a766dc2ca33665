#include "planner/search_space.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/router.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/dtype.hpp"
#include "models/json_fields.hpp"
#include "models/model_desc.hpp"
#include "models/quantization.hpp"

namespace twin {
namespace {

const std::set<std::string> kSearchKeys = {"model",        "dtype",   "hardware", "tp",       "pp",
                                           "preset",       "max_num_batched_tokens", "max_num_seqs",
                                           "router",       "max_gpus", "budget",   "max_model_len",
                                           "ep",           "pd",       "kv_dram_gib",
                                           "quantization", "kv_dtype"};

[[noreturn]] void fail(const std::string& origin, const std::string& key, const std::string& what) {
  throw UsageError(origin + ": " + excerpt(key, 80) + ": " + what);
}

// Runs a name check (resolve_model, router_policy, ...) so that its error
// names the file and the key the name came from.
template <typename Check>
void check_names(const std::vector<std::string>& names, const std::string& origin, const std::string& key,
                 Check check) {
  for (const std::string& name : names) {
    try {
      (void)check(name);
    } catch (const Error& e) {
      fail(origin, key, e.what());
    }
  }
}

std::string known_keys() {
  std::string out;
  for (const auto& k : kSearchKeys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

// A value or a list of values.
std::vector<std::string> strings(const nlohmann::json& v, const std::string& origin, const std::string& key) {
  std::vector<std::string> out;
  auto one = [&](const nlohmann::json& x) {
    if (!x.is_string()) fail(origin, key, "expected a string or a list of strings");
    out.push_back(x.get<std::string>());
  };
  if (v.is_array()) {
    for (const auto& x : v) one(x);
  } else {
    one(v);
  }
  if (out.empty()) fail(origin, key, "expected at least one value");
  return out;
}

std::vector<std::int32_t> ints(const nlohmann::json& v, const std::string& origin, const std::string& key) {
  std::vector<std::int32_t> out;
  auto one = [&](const nlohmann::json& x) {
    if (!x.is_number_integer() || x.get<std::int64_t>() < 1 || x.get<std::int64_t>() > 1'000'000'000) {
      fail(origin, key, "expected a positive integer or a list of them");
    }
    out.push_back(static_cast<std::int32_t>(x.get<std::int64_t>()));
  };
  if (v.is_array()) {
    for (const auto& x : v) one(x);
  } else {
    one(v);
  }
  if (out.empty()) fail(origin, key, "expected at least one value");
  return out;
}

}  // namespace

std::pair<std::int32_t, std::int32_t> parse_pd_split(const std::string& text, const std::string& what) {
  if (text == "0" || text == "none") return {0, 0};
  const std::size_t colon = text.find(':');
  auto count = [&](const std::string& part) {
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || v < 1 || v > 1024) {
      throw UsageError(what + ": expected P:D with 1 to 1024 prefill and decode replicas (or 0 / none: co-located), got '" +
                       excerpt(text, 40) + "'");
    }
    return static_cast<std::int32_t>(v);
  };
  if (colon == std::string::npos) count("");
  return {count(text.substr(0, colon)), count(text.substr(colon + 1))};
}

void apply_search_json(SearchSpace& s, const nlohmann::json& json, const std::string& origin) {
  if (!json.is_object()) fail(origin, "(top level)", "expected a JSON object");
  for (const auto& [key, v] : json.items()) {
    if (!kSearchKeys.count(key)) fail(origin, key, "unknown key (known: " + known_keys() + ")");
    if (key == "quantization" || key == "kv_dtype") {
      if (!v.is_string()) fail(origin, key, "expected a string");
      (key == "quantization" ? s.quantization : s.kv_dtype) = v.get<std::string>();
      if (key == "quantization" && !s.quantization.empty()) check_names({s.quantization}, origin, key, parse_quant_method);
      if (key == "kv_dtype" && !s.kv_dtype.empty()) check_names({s.kv_dtype}, origin, key, parse_dtype_or_auto);
    } else if (key == "model" || key == "dtype") {
      if (!v.is_string()) fail(origin, key, "expected a string");
      (key == "model" ? s.model : s.dtype) = v.get<std::string>();
      if (key == "model") check_names({s.model}, origin, key, resolve_model);
      if (key == "dtype" && !s.dtype.empty()) check_names({s.dtype}, origin, key, parse_dtype_or_auto);
    } else if (key == "hardware") {
      s.hardware = strings(v, origin, key);
      check_names(s.hardware, origin, key, resolve_hardware);
    } else if (key == "preset") {
      s.presets = strings(v, origin, key);
      check_names(s.presets, origin, key, replica_preset);
    } else if (key == "router") {
      s.routers = strings(v, origin, key);
      check_names(s.routers, origin, key, router_policy);
    } else if (key == "tp") {
      s.tp = ints(v, origin, key);
    } else if (key == "pp") {
      s.pp = ints(v, origin, key);
    } else if (key == "ep") {
      s.ep = ints(v, origin, key);
    } else if (key == "pd") {
      s.pd.clear();
      for (const std::string& split : strings(v, origin, key)) {
        try {
          s.pd.push_back(parse_pd_split(split, key));
        } catch (const UsageError& e) {
          fail(origin, key, e.what());
        }
      }
    } else if (key == "kv_dram_gib") {
      s.kv_dram_gib.clear();
      const nlohmann::json list = v.is_array() ? v : nlohmann::json::array({v});
      for (const auto& x : list) {
        if (!x.is_number() || !(x.get<double>() >= 0) || !std::isfinite(x.get<double>()))
          fail(origin, key, "expected a number of GiB >= 0 (0: no tier) or a list of them");
        s.kv_dram_gib.push_back(x.get<double>());
      }
      if (s.kv_dram_gib.empty()) fail(origin, key, "expected at least one value");
    } else if (key == "max_num_batched_tokens") {
      s.max_num_batched_tokens = ints(v, origin, key);
    } else if (key == "max_num_seqs") {
      s.max_num_seqs = ints(v, origin, key);
    } else if (key == "max_model_len") {
      if (v.is_array()) fail(origin, key, "expected one positive integer (prompt + output tokens at most) or \"auto\"");
      const bool auto_len = v.is_string() ? is_auto_max_model_len(v.get<std::string>()) : v == -1;
      s.max_model_len = auto_len ? kMaxModelLenAuto : ints(v, origin, key).front();
    } else if (key == "max_gpus") {
      s.max_gpus = ints(v, origin, key).front();
      if (v.is_array()) fail(origin, key, "expected one positive integer");
    } else if (key == "budget") {
      if (!v.is_number() || !(v.get<double>() > 0)) fail(origin, key, "expected a positive number ($ per hour)");
      s.budget = v.get<double>();
    }
  }
}

void load_search_file(SearchSpace& space, const std::string& path) {
  // The search file is part of what the user asked for: its faults are usage
  // errors (exit 2), read through the same guarded parser as every file.
  nlohmann::json json;
  try {
    json = read_json_file(path);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  apply_search_json(space, json, path);
}

void check_search_space(const SearchSpace& s) {
  (void)resolve_model(s.model);
  if (!s.quantization.empty()) (void)parse_quant_method(s.quantization);
  if (!s.kv_dtype.empty()) (void)parse_dtype_or_auto(s.kv_dtype);
  for (const auto& hw : s.hardware) (void)resolve_hardware(hw);
  for (const auto& p : s.presets) (void)replica_preset(p);
  for (const auto& r : s.routers) (void)router_policy(r);
  if (s.hardware.empty() || s.tp.empty() || s.pp.empty() || s.ep.empty() || s.pd.empty() || s.kv_dram_gib.empty() ||
      s.presets.empty() || s.routers.empty()) {
    throw UsageError("search space: hardware, tp, pp, ep, pd, kv_dram_gib, preset and router need at least one value each");
  }
}

std::vector<Candidate> enumerate_candidates(const SearchSpace& s) {
  const std::vector<std::int32_t> mbt = s.max_num_batched_tokens.empty() ? std::vector<std::int32_t>{0} : s.max_num_batched_tokens;
  const std::vector<std::int32_t> seqs = s.max_num_seqs.empty() ? std::vector<std::int32_t>{0} : s.max_num_seqs;
  std::vector<Candidate> out;
  for (const auto& hw : s.hardware)
    for (auto tp : s.tp)
      for (auto pp : s.pp)
        for (auto ep : s.ep)
          for (const auto& [prefill, decode] : s.pd)
            for (const double dram : s.kv_dram_gib)
              for (const auto& preset : s.presets)
                for (auto m : mbt)
                  for (auto q : seqs)
                    for (const auto& router : s.routers) {
                      Candidate c;
                      c.index = static_cast<std::int32_t>(out.size());
                      c.model = s.model;
                      c.dtype = s.dtype;
                      c.quantization = s.quantization;
                      c.kv_dtype = s.kv_dtype;
                      c.hardware = hw;
                      c.tp = tp;
                      c.pp = pp;
                      c.ep = ep;
                      c.prefill = prefill;
                      c.decode = decode;
                      c.kv_dram_gib = dram;
                      c.preset = preset;
                      c.max_num_batched_tokens = m;
                      c.max_num_seqs = q;
                      c.max_model_len = s.max_model_len;
                      c.router = router;
                      out.push_back(std::move(c));
                    }
  return out;
}

std::string candidate_label(const Candidate& c) {
  std::string out = c.hardware + " tp=" + std::to_string(c.tp);
  if (c.pp != 1) out += " pp=" + std::to_string(c.pp);
  if (c.ep != 1) out += " ep=" + std::to_string(c.ep);
  if (c.disaggregated()) out += " pd=" + std::to_string(c.prefill) + ":" + std::to_string(c.decode);
  if (c.kv_dram_gib > 0) {
    std::ostringstream gib;
    gib << c.kv_dram_gib;
    out += " dram=" + gib.str() + "GiB";
  }
  if (!c.quantization.empty() && c.quantization != "none") out += " " + c.quantization;
  if (!c.kv_dtype.empty() && c.kv_dtype != "auto") out += " kv=" + c.kv_dtype;
  out += " " + c.preset;
  if (c.max_num_batched_tokens > 0) out += " mbt=" + std::to_string(c.max_num_batched_tokens);
  if (c.max_num_seqs > 0) out += " seqs=" + std::to_string(c.max_num_seqs);
  out += " " + c.router;
  return out;
}

nlohmann::ordered_json candidate_json(const Candidate& c) {
  nlohmann::ordered_json j;
  j["index"] = c.index;
  j["label"] = candidate_label(c);
  j["model"] = c.model;
  j["dtype"] = c.dtype;
  // Only where given: other plans' files stay as they were.
  if (!c.quantization.empty()) j["quantization"] = c.quantization;
  if (!c.kv_dtype.empty()) j["kv_dtype"] = c.kv_dtype;
  j["hardware"] = c.hardware;
  j["tp"] = c.tp;
  j["pp"] = c.pp;
  // Only where searched: other plans' files stay as they were.
  if (c.ep != 1) j["ep"] = c.ep;
  if (c.disaggregated()) {
    j["prefill_replicas"] = c.prefill;
    j["decode_replicas"] = c.decode;
  }
  if (c.kv_dram_gib > 0) j["kv_dram_gib"] = c.kv_dram_gib;
  j["preset"] = c.preset;
  j["max_num_batched_tokens"] = c.max_num_batched_tokens > 0 ? nlohmann::ordered_json(c.max_num_batched_tokens) : nullptr;
  j["max_num_seqs"] = c.max_num_seqs > 0 ? nlohmann::ordered_json(c.max_num_seqs) : nullptr;
  j["router"] = c.router;
  // Only where given: other plans' files stay as they were.
  if (c.max_model_len == kMaxModelLenAuto) j["max_model_len"] = "auto";
  if (c.max_model_len > 0) j["max_model_len"] = c.max_model_len;
  return j;
}

ClusterConfig candidate_config(const Candidate& c, std::int32_t replicas, const std::string& slos, std::uint64_t seed) {
  ClusterConfig config;
  ReplicaGroupConfig g;
  g.model = c.model;
  g.dtype = c.dtype;
  g.quantization = c.quantization;
  if (!c.kv_dtype.empty()) g.kv_dtype = c.kv_dtype;
  g.hardware = c.hardware;
  g.tp = c.tp;
  g.pp = c.pp;
  g.ep = c.ep;
  g.count = replicas;
  if (c.disaggregated()) {
    ReplicaGroupConfig prefill = g, decode = g;
    prefill.role = "prefill";
    prefill.count = replicas * c.prefill;
    decode.role = "decode";
    decode.count = replicas * c.decode;
    config.groups = {prefill, decode};
  } else {
    config.groups.push_back(std::move(g));
  }
  if (c.kv_dram_gib > 0) {
    KvTierSpec dram;
    dram.name = "dram";
    dram.capacity_gib = c.kv_dram_gib;
    config.kv_tiers.push_back(dram);
  }
  config.scheduler_preset = c.preset;
  if (c.max_num_batched_tokens > 0) config.overrides.max_num_batched_tokens = c.max_num_batched_tokens;
  if (c.max_num_seqs > 0) config.overrides.max_num_seqs = c.max_num_seqs;
  if (c.max_model_len > 0) config.overrides.max_model_len = c.max_model_len;
  config.max_model_len_auto = c.max_model_len == kMaxModelLenAuto;
  config.router = c.router;
  config.slos = slos;
  config.seed = seed;
  return config;
}

}  // namespace twin
