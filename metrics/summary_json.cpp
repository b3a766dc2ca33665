#include "metrics/summary_json.hpp"

#include <cmath>
#include <limits>
#include <ostream>

namespace twin {
namespace {

using Json = nlohmann::ordered_json;

Json number(double value) { return json_figure(value); }

Json spread(const Spread& s) {
  Json j;
  j["min"] = number(s.min);
  j["max"] = number(s.max);
  j["mean"] = number(s.mean);
  j["cv"] = number(s.cv);
  return j;
}

double figure_from(const nlohmann::json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

// Known: the figures; not known: the reason, never a 0 that reads as a figure.
Json energy_json(const EnergySummary& e) {
  Json j;
  j["known"] = e.known;
  if (!e.known) {
    j["reason"] = e.unknown_reason;
    return j;
  }
  j["energy_j"] = number(static_cast<double>(e.total_uj) * 1e-6);
  j["step_energy_j"] = number(static_cast<double>(e.steps_uj) * 1e-6);
  j["idle_energy_j"] = number(static_cast<double>(e.idle_uj) * 1e-6);
  j["window_s"] = number(e.window_s);
  j["average_power_w"] = number(e.average_power_w);
  j["joules_per_output_token"] = number(e.joules_per_output_token);
  j["joules_per_request"] = number(e.joules_per_request);
  j["kwh"] = number(e.kwh);
  j["cost_per_m_output_tokens"] = number(e.cost_per_m_output_tokens);
  if (e.energy_price_per_kwh > 0) {
    j["energy_price_per_kwh"] = number(e.energy_price_per_kwh);
    j["energy_cost"] = number(e.energy_cost);
    j["energy_cost_per_m_output_tokens"] = number(e.energy_cost_per_m_output_tokens);
  }
  if (e.carbon_g_per_kwh > 0) {
    j["carbon_intensity_g_per_kwh"] = number(e.carbon_g_per_kwh);
    j["co2_g"] = number(e.co2_g);
    j["co2_g_per_m_output_tokens"] = number(e.co2_g_per_m_output_tokens);
  }
  return j;
}

}  // namespace

Json measured_energy_json(const MeasuredEnergy& m) {
  Json j;
  j["known"] = m.known;
  if (!m.known) {
    j["reason"] = m.reason;
    return j;
  }
  j["source"] = m.source;
  j["energy_j"] = number(m.joules);
  j["wall_s"] = number(m.wall_s);
  j["average_power_w"] = number(m.average_power_w);
  j["joules_per_output_token"] = number(m.joules_per_output_token);
  return j;
}

Json latency_stats_json(const LatencyStats& s, Figures figures) {
  const auto figure = [figures](double v) {
    if (figures == Figures::rounded) return json_figure(v);
    return std::isfinite(v) ? Json(v) : Json(nullptr);
  };
  Json j;
  j["count"] = s.count;
  j["mean"] = figure(s.mean);
  j["std"] = figure(s.std);
  j["p50"] = figure(s.p50);
  j["p90"] = figure(s.p90);
  j["p99"] = figure(s.p99);
  j["max"] = figure(s.max);
  return j;
}

LatencyStats latency_stats_from_json(const nlohmann::json& j) {
  LatencyStats s;
  s.count = j.at("count").get<std::uint64_t>();
  s.mean = figure_from(j.at("mean"));
  s.std = figure_from(j.at("std"));
  s.p50 = figure_from(j.at("p50"));
  s.p90 = figure_from(j.at("p90"));
  s.p99 = figure_from(j.at("p99"));
  s.max = figure_from(j.at("max"));
  return s;
}

// Six decimals keep every figure well inside its meaning (1 ns in ms) while
// sparing readers 17-digit noise.
Json json_figure(double value) {
  if (!std::isfinite(value)) return nullptr;
  const double rounded = std::round(value * 1e6) / 1e6;
  return rounded == 0 ? 0.0 : rounded;  // no "-0.0"
}

namespace {

Json slo_attainment_json(const Summary& s) {
  Json attainment = Json::array();
  for (const auto& r : s.slos) {
    Json a;
    a["slo"] = format_slo(r.slo);
    a["metric"] = std::string(metric_name(r.slo.metric));
    a["percentile"] = r.slo.percentile > 0 ? number(r.slo.percentile) : Json(nullptr);
    a["threshold_ms"] = number(r.slo.threshold_ms);
    a["measured_ms"] = number(r.measured_ms);
    a["percentile_met"] = r.slo.percentile > 0 ? Json(r.percentile_met) : Json(nullptr);
    a["request_fraction_met"] = number(r.request_fraction_met);
    attainment.push_back(std::move(a));
  }
  return attainment;
}

Json kv_transfer_json(const Summary& s) {
  Json t;
  t["handed_off"] = s.kv_transfer.handed_off;
  t["transfers"] = s.kv_transfer.transfers;
  t["bytes"] = s.kv_transfer.bytes;
  t["transfer_s"] = number(s.kv_transfer.transfer_s);
  t["wait_ms"] = latency_stats_json(s.kv_transfer.wait_ms);
  t["transfer_ms"] = latency_stats_json(s.kv_transfer.transfer_ms);
  return t;
}

Json kv_tiers_json(const Summary& s) {
  Json k;
  k["lookup_tokens"] = s.kv_tier_lookup_tokens;
  k["hit_rate"] = number(s.kv_tier_hit_rate);
  k["bytes_moved"] = s.kv_tier_bytes_moved;
  k["load_overlap"] = s.kv_tier_load_overlap;
  k["load_stall_s"] = number(s.kv_tier_load_stall_s);
  Json tiers = Json::array();
  for (const KvTierSummary& t : s.kv_tiers) {
    Json x;
    x["name"] = t.name;
    x["capacity_blocks"] = t.capacity_blocks;
    x["hit_tokens"] = t.hit_tokens;
    x["hit_rate"] = number(t.hit_rate);
    x["loaded_bytes"] = t.loaded_bytes;
    x["stored_bytes"] = t.stored_bytes;
    x["demoted_blocks"] = t.demoted_blocks;
    tiers.push_back(std::move(x));
  }
  k["tiers"] = std::move(tiers);
  return k;
}

Json replica_load_json(const Summary& s) {
  Json load;
  load["num_replicas"] = s.replicas.size();
  load["requests"] = spread(s.replica_requests);
  load["tokens"] = spread(s.replica_tokens);
  Json per_replica = Json::array();
  for (const auto& r : s.replicas) {
    per_replica.push_back(Json{{"replica", r.replica}, {"requests", r.requests}, {"tokens", r.tokens}});
  }
  load["per_replica"] = std::move(per_replica);
  return load;
}

Json speculative_json(const Summary& s) {
  Json spec;
  spec["proposed_tokens"] = s.spec_proposed_tokens;
  spec["accepted_tokens"] = s.spec_accepted_tokens;
  spec["verifications"] = s.spec_verifications;
  spec["acceptance_rate"] = number(s.spec_acceptance_rate);
  spec["mean_accepted_tokens"] = number(s.spec_mean_accepted_tokens);
  spec["tokens_per_step"] = number(s.spec_tokens_per_verification);
  return spec;
}

}  // namespace

// summary.json's keys in their published order; a section of more than a
// few keys is its own function.
nlohmann::ordered_json summary_to_json(const Summary& s) {
  Json j;
  j["num_requests"] = s.num_requests;
  j["completed"] = s.completed;
  j["rejected"] = s.rejected;
  j["aborted"] = s.aborted;
  j["ttft_ms"] = latency_stats_json(s.ttft_ms);
  j["tpot_ms"] = latency_stats_json(s.tpot_ms);
  j["itl_ms"] = latency_stats_json(s.itl_ms);
  j["e2el_ms"] = latency_stats_json(s.e2el_ms);
  // Only past the collector's exact limit, so every smaller run's file is as it was.
  if (s.percentiles_streamed) j["percentiles"] = "histogram";
  j["duration_s"] = number(s.duration_s);
  j["total_input_tokens"] = s.total_input_tokens;
  j["total_output_tokens"] = s.total_output_tokens;
  j["request_throughput"] = number(s.request_throughput);
  j["input_throughput"] = number(s.input_throughput);
  j["output_throughput"] = number(s.output_throughput);
  j["total_token_throughput"] = number(s.total_token_throughput);
  j["slos"] = format_slos([&] {
    std::vector<Slo> slos;
    for (const auto& r : s.slos) slos.push_back(r.slo);
    return slos;
  }());
  j["good_requests"] = s.good_requests;
  j["goodput"] = number(s.goodput);
  j["slo_attainment"] = slo_attainment_json(s);
  j["prefix_cache_hit_rate"] = number(s.prefix_cache_hit_rate);
  j["preemptions"] = s.preemptions;
  if (s.disaggregated) j["kv_transfer"] = kv_transfer_json(s);
  if (!s.kv_tiers.empty()) j["kv_tiers"] = kv_tiers_json(s);
  j["replica_load"] = replica_load_json(s);
  j["num_steps"] = s.num_steps;
  j["mean_kv_blocks_used"] = number(s.mean_kv_blocks_used);
  j["max_kv_blocks_used"] = number(s.max_kv_blocks_used);
  j["kv_blocks_capacity"] = s.kv_blocks_capacity;
  j["mean_batch_size"] = number(s.mean_batch_size);
  j["max_batch_size"] = number(s.max_batch_size);
  if (s.spec_proposed_tokens > 0) j["speculative"] = speculative_json(s);
  j["energy"] = energy_json(s.energy);
  if (s.measured_energy) j["measured_energy"] = measured_energy_json(*s.measured_energy);
  j["simulated_time_s"] = number(s.simulated_time_s);
  j["wall_time_s"] = number(s.wall_time_s);
  if (!s.warnings.empty()) j["warnings"] = s.warnings;  // absent when there are none
  j["config"] = s.config;
  return j;
}

void write_summary_json(std::ostream& out, const Summary& summary) {
  out << summary_to_json(summary).dump(2) << '\n';
}

}  // namespace twin
