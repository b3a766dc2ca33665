#include "sim/cluster_config.hpp"

#include <cstdio>
#include <limits>
#include <set>

#include "base/error.hpp"
#include "engine/core/disaggregation.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/router.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "metrics/slo.hpp"
#include "models/dtype.hpp"
#include "models/quantization.hpp"
#include "models/json_fields.hpp"
#include "models/model_desc.hpp"

namespace twin {
namespace {

using Json = nlohmann::json;

[[noreturn]] void fail(const std::string& origin, const std::string& key, const std::string& problem) {
  throw Error(origin + ": " + excerpt(key) + ": " + problem);
}

void check_keys(const Json& obj, const std::string& origin, const std::string& where,
                const std::set<std::string>& known) {
  if (!obj.is_object()) fail(origin, where.empty() ? "(top level)" : where, "expected a JSON object");
  for (const auto& [key, value] : obj.items()) {
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) {
        if (!list.empty()) list += ", ";
        list += k;
      }
      fail(origin, where.empty() ? key : where + "." + key, "unknown key (known: " + list + ")");
    }
  }
}

std::string get_string(const Json& v, const std::string& origin, const std::string& key) {
  if (!v.is_string()) fail(origin, key, "expected a string");
  return v.get<std::string>();
}

std::int64_t get_int(const Json& v, const std::string& origin, const std::string& key, std::int64_t lo,
                     std::int64_t hi) {
  if (!v.is_number_integer()) fail(origin, key, "expected an integer");
  const std::int64_t x = v.get<std::int64_t>();
  if (x < lo || x > hi) {
    fail(origin, key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                          std::to_string(x));
  }
  return x;
}

double get_fraction(const Json& v, const std::string& origin, const std::string& key) {
  if (!v.is_number()) fail(origin, key, "expected a number");
  const double x = v.get<double>();
  if (!(x > 0 && x <= 1)) fail(origin, key, "expected a number in (0, 1], got " + json_excerpt(v));
  return x;
}

// Runs a core check now, so its complaint names this file and key rather
// than surfacing, placeless, when the cluster is built.
template <typename Check>
void core_check(const std::string& origin, const std::string& key, Check check) {
  try {
    check();
  } catch (const Error& e) {
    fail(origin, key, e.what());
  }
}

// Scheduler values go to set_replica_option as text, which checks them (on a
// scratch config here; cross-option checks happen when the cluster is built).
OptionList get_options(const Json& obj, const std::string& origin, const std::string& where, std::string* preset,
                       bool* max_model_len_auto) {
  if (!obj.is_object()) fail(origin, where, "expected a JSON object of scheduler / KV options");
  OptionList out;
  ReplicaConfig scratch = replica_preset("vllm");
  for (const auto& [key, value] : obj.items()) {
    const std::string name = where + "." + key;
    if (key == "preset") {
      if (!preset) fail(origin, name, "a preset applies to the whole cluster: set it in the top-level scheduler");
      *preset = get_string(value, origin, name);
      core_check(origin, name, [&] { (void)replica_preset(*preset); });
      continue;
    }
    if (key == "max_model_len" && is_auto_max_model_len(value.is_string() ? value.get<std::string>() : value.dump())) {
      // vLLM's "auto" (or -1): the largest that fits, settled when the cluster is built.
      if (!max_model_len_auto) fail(origin, name, "'auto' applies to the whole cluster: set it in the top-level scheduler");
      *max_model_len_auto = true;
      continue;
    }
    if (value.is_string()) {
      out.emplace_back(key, value.get<std::string>());
    } else if (value.is_boolean()) {
      out.emplace_back(key, value.get<bool>() ? "true" : "false");
    } else if (value.is_number_integer()) {
      out.emplace_back(key, std::to_string(value.get<std::int64_t>()));
    } else if (value.is_number()) {
      out.emplace_back(key, value.dump());
    } else if (value.is_array()) {
      // e.g. length_bucket_bounds: a comma-separated list
      std::string list;
      for (const auto& x : value) {
        if (!x.is_number_integer()) fail(origin, name, "expected a list of integers");
        if (!list.empty()) list += ',';
        list += std::to_string(x.get<std::int64_t>());
      }
      out.emplace_back(key, list);
    } else {
      fail(origin, name, "expected a string, number, boolean or list of integers");
    }
    core_check(origin, name, [&] { set_replica_option(scratch, out.back().first, out.back().second); });
  }
  return out;
}

ReplicaGroupConfig parse_group(const Json& g, const std::string& origin, const std::string& where) {
  check_keys(g, origin, where,
             {"model", "hardware", "dtype", "kv_dtype", "quantization", "tp", "pp", "count", "gpu_memory_utilization",
              "num_gpu_blocks_override", "scheduler", "replay", "profile", "speculative_config", "role", "ep",
              "expert_busiest_share", "dp", "enable_expert_parallel"});
  ReplicaGroupConfig out;
  for (const auto& [key, v] : g.items()) {
    const std::string name = where + "." + key;
    // Names are resolved here, not first when the cluster is built, so an
    // unknown one is reported with this file and key.
    if (key == "model") {
      out.model = get_string(v, origin, name);
      core_check(origin, name, [&] { (void)resolve_model(out.model); });
    } else if (key == "hardware") {
      out.hardware = get_string(v, origin, name);
      core_check(origin, name, [&] { (void)resolve_hardware(out.hardware); });
    } else if (key == "dtype" || key == "kv_dtype") {
      std::string& dtype = key == "dtype" ? out.dtype : out.kv_dtype;
      dtype = get_string(v, origin, name);
      if (!dtype.empty()) core_check(origin, name, [&] { (void)parse_dtype_or_auto(dtype); });
    } else if (key == "quantization") {
      out.quantization = get_string(v, origin, name);
      core_check(origin, name, [&] { (void)parse_quant_method(out.quantization); });
    } else if (key == "tp") out.tp = static_cast<std::int32_t>(get_int(v, origin, name, 1, 1024));
    else if (key == "pp") out.pp = static_cast<std::int32_t>(get_int(v, origin, name, 1, 1024));
    else if (key == "ep") out.ep = static_cast<std::int32_t>(get_int(v, origin, name, 1, 1024));
    else if (key == "expert_busiest_share") out.expert_busiest_share = get_fraction(v, origin, name);
    else if (key == "dp") out.dp = static_cast<std::int32_t>(get_int(v, origin, name, 1, 1024));
    else if (key == "enable_expert_parallel") {
      if (!v.is_boolean()) fail(origin, name, "expected true or false");
      out.enable_expert_parallel = v.get<bool>();
    }
    else if (key == "count") out.count = static_cast<std::int32_t>(get_int(v, origin, name, 1, 1'000'000));
    else if (key == "gpu_memory_utilization") out.gpu_memory_utilization = get_fraction(v, origin, name);
    else if (key == "num_gpu_blocks_override")
      out.num_gpu_blocks_override = static_cast<std::int32_t>(get_int(v, origin, name, 0, std::numeric_limits<std::int32_t>::max()));
    else if (key == "scheduler") out.scheduler_options = get_options(v, origin, name, nullptr, nullptr);
    else if (key == "replay") out.replay = get_string(v, origin, name);
    else if (key == "profile") out.profile = get_string(v, origin, name);
    else if (key == "speculative_config") out.speculative = speculative_config_from_json(v, origin + ": " + name);
    else if (key == "role") {
      out.role = get_string(v, origin, name);
      core_check(origin, name, [&] { (void)replica_role(out.role); });
    }
  }
  return out;
}

DisaggregationConfig parse_disaggregation(const Json& d, const std::string& origin) {
  const std::string where = "disaggregation";
  check_keys(d, origin, where, {"mode", "conditional_threshold", "kv_transfer", "prefill_router", "decode_router", "replay"});
  DisaggregationConfig out;
  for (const auto& [key, v] : d.items()) {
    const std::string name = where + "." + key;
    if (key == "mode") {
      out.mode = get_string(v, origin, name);
      core_check(origin, name, [&] { (void)disagg_mode(out.mode); });
    } else if (key == "conditional_threshold") {
      out.conditional_threshold = static_cast<std::int32_t>(get_int(v, origin, name, 0, std::numeric_limits<std::int32_t>::max()));
    } else if (key == "kv_transfer") {
      out.kv_transfer = get_string(v, origin, name);
      if (out.kv_transfer != "whole" && out.kv_transfer != "layerwise") {
        fail(origin, name, "unknown KV transfer mode '" + excerpt(out.kv_transfer) + "': known ones are whole, layerwise");
      }
    } else if (key == "replay") {
      out.replay = get_string(v, origin, name);
    } else {
      std::string& router = key == "prefill_router" ? out.prefill_router : out.decode_router;
      router = get_string(v, origin, name);
      core_check(origin, name, [&] { (void)router_policy(router); });
    }
  }
  return out;
}

double get_non_negative(const Json& v, const std::string& origin, const std::string& key) {
  if (!v.is_number()) fail(origin, key, "expected a number");
  const double x = v.get<double>();
  if (!(x >= 0) || x > 1e12) fail(origin, key, "expected a non-negative number, got " + json_excerpt(v));
  return x;
}

std::vector<KvTierSpec> parse_kv_tiers(const Json& list, const std::string& origin) {
  if (!list.is_array()) fail(origin, "kv_tiers", "expected a list of tiers, nearest to HBM first");
  std::vector<KvTierSpec> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = "kv_tiers[" + std::to_string(i) + "]";
    const Json& t = list[i];
    check_keys(t, origin, where, {"name", "capacity_gib", "capacity_blocks", "read_gbps", "write_gbps", "latency_us"});
    KvTierSpec spec;
    for (const auto& [key, v] : t.items()) {
      const std::string name = where + "." + key;
      if (key == "name") spec.name = get_string(v, origin, name);
      else if (key == "capacity_gib") spec.capacity_gib = get_non_negative(v, origin, name);
      else if (key == "capacity_blocks") spec.capacity_blocks = get_int(v, origin, name, 1, std::numeric_limits<std::int64_t>::max());
      else if (key == "read_gbps") spec.read_gbps = get_non_negative(v, origin, name);
      else if (key == "write_gbps") spec.write_gbps = get_non_negative(v, origin, name);
      else if (key == "latency_us") spec.latency_us = get_non_negative(v, origin, name);
    }
    if (spec.name.empty()) fail(origin, where + ".name", "every tier needs a name (dram, ssd or your own)");
    if (!names.insert(spec.name).second) fail(origin, where + ".name", "tier '" + spec.name + "' is listed twice");
    if ((spec.capacity_gib > 0) == (spec.capacity_blocks > 0)) {
      fail(origin, where, "give exactly one of capacity_gib (> 0) and capacity_blocks");
    }
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace

ClusterConfig parse_cluster_config(const Json& json, const std::string& origin) {
  check_keys(json, origin, "",
             {"groups", "scheduler", "router", "slos", "seed", "gpu_memory_utilization", "num_gpu_blocks_override",
              "disaggregation", "kv_tiers", "kv_tier_load_overlap", "router_refresh_s"});
  ClusterConfig out;
  out.origin = origin;
  for (const auto& [key, v] : json.items()) {
    if (key == "groups") {
      if (!v.is_array() || v.empty()) fail(origin, key, "expected a non-empty list of replica groups");
      if (v.size() > kMaxReplicaGroups) {
        fail(origin, key, std::to_string(v.size()) + " replica groups, more than the " +
                              std::to_string(kMaxReplicaGroups) +
                              " allowed (a group is a kind of replica: give the replicas of one kind as its count)");
      }
      for (std::size_t i = 0; i < v.size(); ++i) {
        out.groups.push_back(parse_group(v[i], origin, "groups[" + std::to_string(i) + "]"));
      }
    } else if (key == "scheduler") {
      out.scheduler_options = get_options(v, origin, key, &out.scheduler_preset, &out.max_model_len_auto);
    } else if (key == "disaggregation") {
      out.disaggregation = parse_disaggregation(v, origin);
    } else if (key == "kv_tiers") {
      out.kv_tiers = parse_kv_tiers(v, origin);
    } else if (key == "kv_tier_load_overlap") {
      if (!v.is_boolean()) fail(origin, key, "expected true or false");
      out.kv_tier_load_overlap = v.get<bool>();
    } else if (key == "router") {
      out.router = get_string(v, origin, key);
      out.router_given = true;
      core_check(origin, key, [&] { (void)router_policy(out.router); });
    } else if (key == "router_refresh_s") {
      if (!v.is_number()) fail(origin, key, "expected a number of seconds");
      out.router_refresh_s = v.get<double>();
      core_check(origin, key, [&] { check_router_refresh(out.router_refresh_s, ""); });
    } else if (key == "slos") {
      out.slos = get_string(v, origin, key);
      core_check(origin, key, [&] { (void)parse_slos(out.slos); });
    } else if (key == "seed") {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
        fail(origin, key, "expected a non-negative integer");
      }
      out.seed = v.get<std::uint64_t>();
    } else if (key == "gpu_memory_utilization") {
      out.gpu_memory_utilization = get_fraction(v, origin, key);
    } else if (key == "num_gpu_blocks_override") {
      out.num_gpu_blocks_override =
          static_cast<std::int32_t>(get_int(v, origin, key, 0, std::numeric_limits<std::int32_t>::max()));
    }
  }
  return out;
}

void check_router_refresh(double seconds, const std::string& what) {
  if (seconds == 0) return;
  if (!(seconds >= kMinRouterRefreshS && seconds <= kMaxRouterRefreshS)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", seconds);
    throw UsageError((what.empty() ? std::string() : what + ": ") + "expected 0 (the router sees live state) or a period from 1e-06 to 86400 seconds, got " +
                     buf);
  }
}

bool is_auto_max_model_len(const std::string& text) { return text == "auto" || text == "-1"; }

bool has_pools(const ClusterConfig& config) {
  for (const auto& g : config.groups) {
    if (g.role != "mixed") return true;
  }
  return false;
}

ClusterConfig load_cluster_config(const std::string& path) {
  return parse_cluster_config(read_json_file(path), path);
}

nlohmann::ordered_json cluster_config_json(const ClusterConfig& config) {
  auto options_json = [](const OptionList& options) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const auto& [k, v] : options) o[k] = v;
    return o;
  };
  nlohmann::ordered_json out;
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const auto& g : config.groups) {
    nlohmann::ordered_json j;
    j["model"] = g.model;
    j["hardware"] = g.hardware;
    j["dtype"] = g.dtype;
    j["kv_dtype"] = g.kv_dtype;
    if (!g.quantization.empty()) j["quantization"] = g.quantization;
    j["tp"] = g.tp;
    j["pp"] = g.pp;
    // Only an EP group echoes it: other runs' summaries stay as they were.
    if (g.ep != 1) j["ep"] = g.ep;
    if (g.expert_busiest_share > 0) j["expert_busiest_share"] = g.expert_busiest_share;
    if (g.dp != 1) j["dp"] = g.dp;
    if (g.enable_expert_parallel) j["enable_expert_parallel"] = true;
    j["count"] = g.count;
    if (g.gpu_memory_utilization > 0) j["gpu_memory_utilization"] = g.gpu_memory_utilization;
    if (g.num_gpu_blocks_override >= 0) j["num_gpu_blocks_override"] = g.num_gpu_blocks_override;
    if (!g.scheduler_options.empty()) j["scheduler"] = options_json(g.scheduler_options);
    if (!g.replay.empty()) j["replay"] = g.replay;
    if (!g.profile.empty()) j["profile"] = g.profile;
    if (g.speculative) j["speculative_config"] = speculative_config_json(*g.speculative);
    if (g.role != "mixed") j["role"] = g.role;
    groups.push_back(std::move(j));
  }
  out["groups"] = std::move(groups);
  nlohmann::ordered_json sched;
  sched["preset"] = config.scheduler_preset;
  for (const auto& [k, v] : config.scheduler_options) sched[k] = v;
  for (const auto& [k, v] : override_options(config.overrides)) sched[k] = v;
  if (config.max_model_len_auto) sched["max_model_len"] = "auto";
  out["scheduler"] = std::move(sched);
  out["router"] = config.router;
  // Only a run with a refresh period echoes it: other runs' summaries stay as they were.
  if (config.router_refresh_s > 0) out["router_refresh_s"] = config.router_refresh_s;
  if (has_pools(config)) {
    // Only a cluster with pools echoes it: other runs' summaries stay as they were.
    const DisaggregationConfig& d = config.disaggregation;
    nlohmann::ordered_json j;
    j["mode"] = d.mode;
    j["conditional_threshold"] = d.conditional_threshold;
    j["kv_transfer"] = d.kv_transfer;
    j["prefill_router"] = d.prefill_router.empty() ? config.router : d.prefill_router;
    j["decode_router"] = d.decode_router.empty() ? config.router : d.decode_router;
    if (!d.replay.empty()) j["replay"] = d.replay;
    out["disaggregation"] = std::move(j);
  }
  out["slos"] = config.slos;
  out["seed"] = config.seed;
  out["gpu_memory_utilization"] = config.gpu_memory_utilization;
  out["num_gpu_blocks_override"] = config.num_gpu_blocks_override;
  if (!config.kv_tiers.empty()) {
    // Only a run with tiers echoes them: other runs' summaries stay as they were.
    nlohmann::ordered_json tiers = nlohmann::ordered_json::array();
    for (const KvTierSpec& t : config.kv_tiers) {
      nlohmann::ordered_json j;
      j["name"] = t.name;
      if (t.capacity_gib > 0) j["capacity_gib"] = t.capacity_gib;
      if (t.capacity_blocks > 0) j["capacity_blocks"] = t.capacity_blocks;
      if (t.read_gbps > 0) j["read_gbps"] = t.read_gbps;
      if (t.write_gbps > 0) j["write_gbps"] = t.write_gbps;
      if (t.latency_us >= 0) j["latency_us"] = t.latency_us;
      tiers.push_back(std::move(j));
    }
    out["kv_tiers"] = std::move(tiers);
    out["kv_tier_load_overlap"] = config.kv_tier_load_overlap;
  }
  return out;
}

}  // namespace twin
