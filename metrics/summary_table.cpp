#include "metrics/summary_table.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace twin {
namespace {

constexpr std::size_t kWidth = 50;

std::string fixed(double value, int decimals) {
  if (!std::isnan(value) && !std::isfinite(value)) return value > 0 ? "inf" : "-inf";
  if (std::isnan(value)) return "n/a";
  std::array<char, 400> buffer{};
  const auto [end, ec] =
      std::to_chars(buffer.data(), buffer.data() + buffer.size(), value, std::chars_format::fixed, decimals);
  return ec == std::errc() ? std::string(buffer.data(), end) : "n/a";
}

class Table {
 public:
  explicit Table(std::ostream& out) : out_(out) {}
  void title(const std::string& text) { banner(text, '='); }
  void section(const std::string& text) { banner(text, '-'); }
  void row(const std::string& label, const std::string& value) {
    std::string line = label + ":";
    if (line.size() < 40) line.resize(40, ' ');
    out_ << line << ' ' << value << '\n';
  }
  void rule() { out_ << std::string(kWidth, '=') << '\n'; }

 private:
  void banner(const std::string& text, char fill) {
    const std::string middle = " " + text + " ";
    const std::size_t pad = middle.size() < kWidth ? kWidth - middle.size() : 0;
    out_ << std::string(pad / 2, fill) << middle << std::string(pad - pad / 2, fill) << '\n';
  }
  std::ostream& out_;
};

void latency_rows(Table& t, const std::string& name, const std::string& title, const LatencyStats& s) {
  t.section(title);
  t.row("Mean " + name + " (ms)", fixed(s.mean, 2));
  t.row("Median " + name + " (ms)", fixed(s.p50, 2));
  t.row("Std " + name + " (ms)", fixed(s.std, 2));
  t.row("P90 " + name + " (ms)", fixed(s.p90, 2));
  t.row("P99 " + name + " (ms)", fixed(s.p99, 2));
  t.row("Max " + name + " (ms)", fixed(s.max, 2));
}

std::string spread_text(const Spread& s, int decimals) {
  return fixed(s.min, decimals) + " / " + fixed(s.mean, decimals) + " / " + fixed(s.max, decimals) +
         " (cv " + fixed(s.cv, 3) + ")";
}

std::string value_text(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "on" : "off";
  return v.dump();
}

// What was run, from the config echo: each resolved group of a simulated
// cluster (or the engine's own echo), so that a pasted table names its
// model, hardware, layout and the scheduler knobs that shape the figures.
void config_rows(Table& t, const nlohmann::ordered_json& config) {
  std::vector<const nlohmann::ordered_json*> groups;
  if (config.contains("resolved_groups") && config["resolved_groups"].is_array()) {
    for (const auto& g : config["resolved_groups"]) groups.push_back(&g);
  } else if (config.contains("model")) {
    groups.push_back(&config);
  }
  if (groups.empty()) return;
  t.section("Configuration");
  static constexpr std::array<std::pair<const char*, const char*>, 10> kRows{{
      {"model", "Model"},
      {"hardware", "Hardware"},
      {"replicas", "Replicas"},
      {"scheduler_preset", "Scheduler preset"},
      {"max_num_seqs", "max_num_seqs"},
      {"max_num_batched_tokens", "max_num_batched_tokens"},
      {"max_model_len", "max_model_len"},
      {"block_size", "Block size (tokens)"},
      {"enable_prefix_caching", "Prefix caching"},
      {"async_scheduling", "Async scheduling"},
  }};
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const nlohmann::ordered_json& g = *groups[i];
    const std::string prefix = groups.size() > 1 ? "Group " + std::to_string(i) + " " : "";
    for (const auto& [key, label] : kRows) {
      if (g.contains(key)) t.row(prefix + label, value_text(g[key]));
      if (std::string_view(key) == "hardware" && g.contains("tp")) {
        t.row(prefix + "Layout (tp / pp / ep)", value_text(g["tp"]) + " / " + value_text(g.value("pp", nlohmann::ordered_json(1))) +
                                                  " / " + value_text(g.value("ep", nlohmann::ordered_json(1))));
      }
    }
  }
}

// KV hand-offs (disaggregated pools) and tiers, where the run had them.
void transfer_and_tier_rows(Table& t, const Summary& s) {
  if (s.disaggregated) {
    const TransferSummary& x = s.kv_transfer;
    t.section("KV transfers (prefill to decode)");
    t.row("Requests handed off", std::to_string(x.handed_off));
    t.row("Transfers", std::to_string(x.transfers));
    t.row("KV moved (GB)", fixed(static_cast<double>(x.bytes) / 1e9, 3));
    t.row("Wait for decode blocks, mean / p99 (ms)",
          x.wait_ms.count > 0 ? fixed(x.wait_ms.mean, 2) + " / " + fixed(x.wait_ms.p99, 2) : std::string("-"));
    t.row("Transfer time, mean / p99 (ms)",
          x.transfer_ms.count > 0 ? fixed(x.transfer_ms.mean, 2) + " / " + fixed(x.transfer_ms.p99, 2) : std::string("-"));
  }
  if (!s.kv_tiers.empty()) {
    t.section("KV tiers (prefix tokens hit, bytes in / out)");
    for (const KvTierSummary& x : s.kv_tiers) {
      t.row(x.name, fixed(100.0 * x.hit_rate, 2) + "% hit, " + fixed(static_cast<double>(x.stored_bytes) / 1e9, 3) +
                        " GB stored, " + fixed(static_cast<double>(x.loaded_bytes) / 1e9, 3) + " GB loaded");
    }
    t.row("Prefix hit rate, all tiers", fixed(100.0 * s.kv_tier_hit_rate, 2) + "%");
    t.row("Moved between tiers (GB)", fixed(static_cast<double>(s.kv_tier_bytes_moved) / 1e9, 3));
    t.row("Steps waiting for loads (s)", fixed(s.kv_tier_load_stall_s, 3));
  }
}

void energy_rows(Table& t, const Summary& s) {
  t.section("Energy");
  if (!s.energy.known) {
    t.row("Energy", "not known: " + s.energy.unknown_reason);
  } else {
    const EnergySummary& e = s.energy;
    t.row("Energy (J)", fixed(static_cast<double>(e.total_uj) * 1e-6, 1));
    t.row("  in steps / idle (J)", fixed(static_cast<double>(e.steps_uj) * 1e-6, 1) + " / " +
                                    fixed(static_cast<double>(e.idle_uj) * 1e-6, 1));
    t.row("Average power (W)", fixed(e.average_power_w, 1));
    t.row("Energy per output token (J)", fixed(e.joules_per_output_token, 4));
    t.row("Energy per request (J)", fixed(e.joules_per_request, 2));
    if (e.cost_per_m_output_tokens > 0) t.row("Cost per M output tokens ($)", fixed(e.cost_per_m_output_tokens, 4));
    if (e.energy_price_per_kwh > 0) {
      t.row("Energy (kWh)", fixed(e.kwh, 6));
      t.row("Electricity ($)", fixed(e.energy_cost, 6));
      t.row("Electricity per M output tokens ($)", fixed(e.energy_cost_per_m_output_tokens, 4));
    }
    if (e.carbon_g_per_kwh > 0) {
      t.row("CO2 (g)", fixed(e.co2_g, 3));
      t.row("CO2 per M output tokens (g)", fixed(e.co2_g_per_m_output_tokens, 2));
    }
  }
}

}  // namespace

void print_summary_table(std::ostream& out, const Summary& s) {
  Table t(out);
  t.title("twinserve result");
  t.row("Requests", std::to_string(s.num_requests));
  t.row("Successful requests", std::to_string(s.completed));
  t.row("Rejected requests", std::to_string(s.rejected));
  t.row("Aborted requests", std::to_string(s.aborted));
  t.row("Benchmark duration (s)", fixed(s.duration_s, 2));
  if (s.simulated_time_s > 0) t.row("Simulated time (s)", fixed(s.simulated_time_s, 2));
  if (s.wall_time_s > 0) t.row("Wall time (s)", fixed(s.wall_time_s, 2));
  t.row("Total input tokens", std::to_string(s.total_input_tokens));
  t.row("Total generated tokens", std::to_string(s.total_output_tokens));
  t.row("Request throughput (req/s)", fixed(s.request_throughput, 2));
  t.row("Input token throughput (tok/s)", fixed(s.input_throughput, 2));
  t.row("Output token throughput (tok/s)", fixed(s.output_throughput, 2));
  t.row("Total token throughput (tok/s)", fixed(s.total_token_throughput, 2));
  if (!s.slos.empty()) {
    t.row("Goodput (req/s)", fixed(s.goodput, 2));
    t.section("SLO attainment");
    for (const auto& r : s.slos) {
      std::string value = "within: " + fixed(100.0 * r.request_fraction_met, 2) + "% of requests";
      if (r.slo.percentile > 0) {
        value = fixed(r.measured_ms, 2) + " ms " + (r.percentile_met ? "PASS" : "FAIL") + "; " + value;
      }
      t.row(format_slo(r.slo), value);
    }
  }
  config_rows(t, s.config);
  latency_rows(t, "TTFT", "Time to First Token", s.ttft_ms);
  latency_rows(t, "TPOT", "Time per Output Token (excl. 1st token)", s.tpot_ms);
  latency_rows(t, "ITL", "Inter-token Latency", s.itl_ms);
  latency_rows(t, "E2EL", "End-to-end Latency", s.e2el_ms);
  t.section("KV cache and batching");
  t.row("Prefix cache hit rate (%)", fixed(100.0 * s.prefix_cache_hit_rate, 2));
  t.row("Preemptions", std::to_string(s.preemptions));
  if (s.num_steps > 0) {
    t.row("Steps", std::to_string(s.num_steps));
    std::string mean_kv = fixed(s.mean_kv_blocks_used, 1);
    std::string max_kv = fixed(s.max_kv_blocks_used, 0);
    if (s.kv_blocks_capacity > 0) {
      const double capacity = static_cast<double>(s.kv_blocks_capacity);
      mean_kv += " (" + fixed(100.0 * s.mean_kv_blocks_used / capacity, 1) + "%)";
      max_kv += " (" + fixed(100.0 * s.max_kv_blocks_used / capacity, 1) + "%)";
    }
    t.row("Mean KV blocks used per step", mean_kv);
    t.row("Max KV blocks used", max_kv);
    t.row("Mean batch size", fixed(s.mean_batch_size, 2));
    t.row("Max batch size", fixed(s.max_batch_size, 0));
  }
  transfer_and_tier_rows(t, s);
  energy_rows(t, s);
  t.section("Replica load (min / mean / max)");
  t.row("Replicas", std::to_string(s.replicas.size()));
  t.row("Requests per replica", spread_text(s.replica_requests, 1));
  t.row("Tokens per replica", spread_text(s.replica_tokens, 0));
  t.rule();
}

void print_summary_warnings(std::ostream& out, const Summary& summary) {
  for (const std::string& w : summary.warnings) out << "warning: " << w << "\n";
}

}  // namespace twin
