#include "planner/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <numeric>
#include <ostream>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/router.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/json_fields.hpp"
#include "models/model_desc.hpp"
#include "planner/client_run.hpp"
#include "planner/thread_pool.hpp"
#include "sim/cluster.hpp"
#include "sim/data_parallel.hpp"
#include "sim/run.hpp"

namespace twin {
namespace {

const std::set<std::string> kTopKeys = {"router", "seed", "gpu_memory_utilization", "num_gpu_blocks_override"};
const std::set<std::string> kGroupKeys = {"model", "hardware", "dtype", "kv_dtype", "tp", "pp", "count", "replicas",
                                          "ep", "expert_busiest_share", "dp"};

enum class KeyKind { top, group, preset, scheduler, rate_scale, client };

// The clients' cap (traces/clients.hpp): not a cluster key, how the trace is sent.
constexpr const char* kClientKey = "max_concurrency";

KeyKind key_kind(const std::string& key) {
  if (key == "rate_scale") return KeyKind::rate_scale;
  if (key == kClientKey) return KeyKind::client;
  if (key == "preset" || key == "scheduler.preset") return KeyKind::preset;
  if (kTopKeys.count(key)) return KeyKind::top;
  if (kGroupKeys.count(key)) return KeyKind::group;
  return KeyKind::scheduler;
}

std::string scheduler_key(const std::string& key) {
  return key.rfind("scheduler.", 0) == 0 ? key.substr(10) : key;
}

// Numbers and booleans as JSON literals, everything else a string.
nlohmann::json value_json(const std::string& text) {
  try {
    nlohmann::json j = parse_json_guarded(text, "--vary value");
    if (j.is_number() || j.is_boolean()) return j;
  } catch (const Error&) {  // not JSON (or 1e309): a string, checked where it is used
  }
  return text;
}

std::string known_keys() {
  std::string out = "rate_scale, max_concurrency, preset";
  for (const auto& k : kTopKeys) out += ", " + k;
  for (const auto& k : kGroupKeys) out += ", " + k;
  return out + ", or any scheduler / KV option (e.g. max_num_batched_tokens, block_size, enable_prefix_caching)";
}

std::string fixed(double x, int decimals) {
  if (!std::isfinite(x)) return "";
  std::ostringstream s;
  s.imbue(std::locale::classic());
  s << std::fixed << std::setprecision(decimals) << x;
  return s.str();
}

}  // namespace

VaryAxis parse_vary(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    throw UsageError("--vary '" + excerpt(text, 80) + "': expected KEY=V1,V2,...");
  }
  VaryAxis axis;
  axis.key = std::string(text.substr(0, eq));
  std::string rest(text.substr(eq + 1));
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = rest.find(',', start);
    std::string v = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (v.empty()) throw UsageError("--vary " + excerpt(axis.key, 80) + ": an empty value in '" + excerpt(rest, 80) + "'");
    axis.values.push_back(std::move(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return axis;
}

ClusterConfig apply_vary(const ClusterConfig& base, const std::vector<VaryAxis>& axes, const std::vector<std::string>& values,
                         double& rate_scale) {
  nlohmann::json json = nlohmann::json::parse(cluster_config_json(base).dump());
  if (json["groups"].empty()) json["groups"] = nlohmann::json::array({nlohmann::json::object()});
  rate_scale = 1.0;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::string& key = axes[i].key;
    const std::string& value = values[i];
    switch (key_kind(key)) {
      case KeyKind::rate_scale: {
        const nlohmann::json v = value_json(value);
        if (!v.is_number() || !(v.get<double>() > 0)) throw UsageError("--vary rate_scale: expected positive numbers, got " + excerpt(value, 80));
        rate_scale = v.get<double>();
        break;
      }
      case KeyKind::client: break;  // client_options_at() reads it
      case KeyKind::preset: json["scheduler"]["preset"] = value; break;
      case KeyKind::top: json[key] = key == "router" ? nlohmann::json(value) : value_json(value); break;
      case KeyKind::group: {
        const std::string k = key == "replicas" ? "count" : key;
        const bool text = k == "model" || k == "hardware" || k == "dtype" || k == "kv_dtype";
        for (auto& g : json["groups"]) g[k] = text ? nlohmann::json(value) : value_json(value);
        break;
      }
      case KeyKind::scheduler: json["scheduler"][scheduler_key(key)] = value; break;
    }
  }
  try {
    ClusterConfig config = parse_cluster_config(json, "--vary");
    config.origin = base.origin;  // the groups are the base config's
    return config;
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

ClientOptions client_options_at(const ClientOptions& base, const std::vector<VaryAxis>& axes,
                                const std::vector<std::string>& values) {
  ClientOptions out = base;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (key_kind(axes[i].key) != KeyKind::client) continue;
    const nlohmann::json v = value_json(values[i]);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 2147483647) {
      throw UsageError("--max-concurrency (--vary max_concurrency): expected positive integers, got " +
                       excerpt(values[i], 80));
    }
    out.max_concurrency = static_cast<std::int32_t>(v.get<std::int64_t>());
  }
  return out;
}

void check_vary_axes(const ClusterConfig& base, const std::vector<VaryAxis>& axes) {
  if (axes.empty()) throw UsageError("sweep: give at least one axis: --vary KEY=V1,V2,... or a list flag (--tp, --data-parallel-size, --max-concurrency)");
  std::set<std::string> seen;
  for (const auto& axis : axes) {
    if (!seen.insert(axis.key).second) throw UsageError("--vary " + excerpt(axis.key, 80) + ": the key is given twice");
    const KeyKind kind = key_kind(axis.key);
    for (const auto& v : axis.values) {
      try {
        if (kind == KeyKind::client) {
          (void)client_options_at({}, {axis}, {v});
        } else if (kind == KeyKind::scheduler) {
          ReplicaConfig probe = replica_preset(base.scheduler_preset);
          // max_model_len=auto is the cluster's to settle (build_cluster).
          if (scheduler_key(axis.key) != "max_model_len" || !is_auto_max_model_len(v)) {
            set_replica_option(probe, scheduler_key(axis.key), v);
          }
        } else if (kind == KeyKind::preset) {
          (void)replica_preset(v);
        } else if (axis.key == "router") {
          (void)router_policy(v);
        } else if (axis.key == "hardware") {
          (void)resolve_hardware(v);
        } else if (axis.key == "model") {
          (void)resolve_model(v);
        }
        double scale = 1;
        (void)apply_vary(base, {axis}, {v}, scale);
      } catch (const Error& e) {
        const std::string what = e.what();
        if (kind == KeyKind::scheduler && what.find("unknown replica option") != std::string::npos) {
          throw UsageError("--vary " + excerpt(axis.key, 80) + ": unknown key; known: " + known_keys());
        }
        throw UsageError("--vary " + excerpt(axis.key, 80) + "=" + excerpt(v, 80) + ": " + what);
      }
    }
  }
}

std::size_t grid_size(const std::vector<VaryAxis>& axes) {
  std::size_t total = 1;
  for (const auto& a : axes) total *= a.values.size();
  return total;
}

std::vector<SweepPoint> run_sweep(const ClusterConfig& base, const std::vector<VaryAxis>& axes, const LoadedTrace& trace,
                                  const SweepOptions& options) {
  const std::size_t total = grid_size(axes);
  std::vector<SweepPoint> points(total);
  std::vector<std::uint8_t> finished(total, 0);  // per point: ran to its end (or failed)
  for (std::size_t p = 0; p < total; ++p) {
    std::size_t rest = p;
    points[p].values.resize(axes.size());
    for (std::size_t i = axes.size(); i-- > 0;) {
      points[p].values[i] = axes[i].values[rest % axes[i].values.size()];
      rest /= axes[i].values.size();
    }
  }
  std::vector<std::size_t> all(total);
  std::iota(all.begin(), all.end(), 0);
  parallel_for(all, options.jobs, [&](std::size_t p) {
    if (options.stop && options.stop()) return;
    SweepPoint& point = points[p];
    double scale = 1;
    ClusterConfig config = apply_vary(base, axes, point.values, scale);
    try {
      // A DP instance runs under vLLM's coordinator unless a router is
      // given (as simulate's flags do); the config's JSON round trip names one always.
      config.router_given = base.router_given || std::any_of(axes.begin(), axes.end(), [](const VaryAxis& a) { return a.key == "router"; });
      config.router = data_parallel_router(config);
      const Cluster cluster = build_cluster(config);
      for (const auto& g : cluster.groups) {
        point.replicas += g.config.count;
        const std::int32_t gpus = g.config.count * g.layout.tp * g.layout.pp * g.layout.ep;
        point.gpus += gpus;
        point.cost_per_hour += gpus * g.hardware.price_per_gpu_hour;
      }
      ScaledTraceSource source(trace, options.max_requests, scale);
      RunOutputs outputs;
      outputs.stop = options.stop_running;
      const ClientOptions clients = client_options_at(options.clients, axes, point.values);
      const ClientRun sent = run_with_clients(config, source, clients, outputs);
      const RunResult& run = sent.run;
      if (run.stats.stopped) return;  // a part of the trace is no figure
      const Summary& s = run.summary;
      // --request-rate inf offers no rate (every request at once): the rate cell stays empty.
      const double rate = clients.at_once ? std::numeric_limits<double>::infinity()
                                          : arrival_rate(trace, options.max_requests) * scale;
      point.result = judge(s, run.stats.unserved, rate);
      point.result.peak_in_flight = sent.peak_in_flight;
      point.has_slos = !s.slos.empty();
      point.itl_p99_ms = stat_or_nan(s.itl_ms, &LatencyStats::p99);
      point.request_throughput = s.request_throughput;
      point.goodput = s.goodput;
      point.prefix_cache_hit_rate = s.prefix_cache_hit_rate;
      point.num_requests = s.num_requests;
      point.preemptions = s.preemptions;
      const double unknown = std::numeric_limits<double>::quiet_NaN();
      point.average_power_w = s.energy.known ? s.energy.average_power_w : unknown;
      point.joules_per_output_token = s.energy.known ? s.energy.joules_per_output_token : unknown;
    } catch (const Error& e) {
      point.error = e.what();
    }
    finished[p] = 1;
  }, options.progress);
  std::vector<SweepPoint> out;
  out.reserve(total);
  for (std::size_t p = 0; p < total; ++p) {
    if (finished[p]) out.push_back(std::move(points[p]));
  }
  return out;
}

namespace {
const char* const kColumns[] = {"status", "replicas", "gpus", "cost_per_hour", "rate_rps", "num_requests", "completed",
                                "rejected", "aborted", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms",
                                "tpot_p90_ms", "tpot_p99_ms", "itl_p99_ms", "e2el_p50_ms", "e2el_p90_ms",
                                "request_throughput", "output_throughput", "goodput", "slo_met", "prefix_cache_hit_rate",
                                "preemptions", "overloaded", "average_power_w", "joules_per_output_token"};

std::vector<std::string> point_cells(const SweepPoint& p) {
  if (!p.error.empty()) return {"error"};
  const ProbeResult& r = p.result;
  const auto ms = [](const LatencyStats& stats, double LatencyStats::*stat) {
    return fixed(stat_or_nan(stats, stat), 3);
  };
  using S = LatencyStats;
  // An overloaded point (simulate's warning: the queue grew all along) is
  // not "ok": its latencies measure the queue.
  return {r.overloaded ? "overloaded" : "ok", std::to_string(p.replicas), std::to_string(p.gpus), fixed(p.cost_per_hour, 2), fixed(r.rate, 4),
          std::to_string(p.num_requests), std::to_string(r.completed), std::to_string(r.rejected), std::to_string(r.aborted),
          ms(r.ttft_ms, &S::p50), ms(r.ttft_ms, &S::p90), ms(r.ttft_ms, &S::p99), ms(r.tpot_ms, &S::p50),
          ms(r.tpot_ms, &S::p90), ms(r.tpot_ms, &S::p99), fixed(p.itl_p99_ms, 3), ms(r.e2el_ms, &S::p50),
          ms(r.e2el_ms, &S::p90), fixed(p.request_throughput, 4), fixed(r.output_throughput, 2), fixed(p.goodput, 4),
          p.has_slos ? (r.pass ? "yes" : "no") : "", fixed(p.prefix_cache_hit_rate, 4), std::to_string(p.preemptions),
          r.overloaded ? "yes" : "no", fixed(p.average_power_w, 1), fixed(p.joules_per_output_token, 4)};
}

std::string csv_text(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}
}  // namespace

void write_sweep_csv(std::ostream& out, const std::vector<VaryAxis>& axes, const std::vector<SweepPoint>& points) {
  // peak_in_flight only where clients sent the requests: other sweeps' files stay as they were.
  const bool clients = std::any_of(points.begin(), points.end(), [](const SweepPoint& p) { return p.result.peak_in_flight > 0; });
  for (const auto& a : axes) out << csv_text(a.key) << ",";
  for (const char* c : kColumns) out << c << ",";
  if (clients) out << "peak_in_flight,";
  out << "error\n";
  const std::size_t ncols = std::size(kColumns);
  for (const auto& p : points) {
    for (const auto& v : p.values) out << csv_text(v) << ",";
    std::vector<std::string> cells = point_cells(p);
    cells.resize(ncols);
    if (clients) cells.push_back(p.error.empty() ? std::to_string(p.result.peak_in_flight) : "");
    for (const auto& c : cells) out << c << ",";
    out << csv_text(p.error) << "\n";
  }
}

void print_sweep_table(std::ostream& out, const std::vector<VaryAxis>& axes, const std::vector<SweepPoint>& points) {
  for (const auto& a : axes) out << std::left << std::setw(std::max<int>(12, static_cast<int>(a.key.size()) + 2)) << a.key;
  out << std::right << std::setw(11) << "ttft_p90" << std::setw(11) << "ttft_p99" << std::setw(10) << "tpot_p90"
      << std::setw(10) << "tpot_p99" << std::setw(11) << "e2el_p90" << std::setw(10) << "req/s" << std::setw(10) << "tok/s"
      << std::setw(10) << "goodput" << std::setw(6) << "SLO" << std::setw(8) << "$/h" << "  status\n";
  for (const auto& p : points) {
    for (std::size_t i = 0; i < axes.size(); ++i) {
      out << std::left << std::setw(std::max<int>(12, static_cast<int>(axes[i].key.size()) + 2)) << p.values[i];
    }
    if (!p.error.empty()) {
      out << "error: " << p.error << "\n";
      continue;
    }
    const ProbeResult& r = p.result;
    auto show = [](double x, int d) { const std::string s = fixed(x, d); return s.empty() ? std::string("-") : s; };
    using S = LatencyStats;
    out << std::right << std::setw(11) << show(stat_or_nan(r.ttft_ms, &S::p90), 1) << std::setw(11) << show(stat_or_nan(r.ttft_ms, &S::p99), 1)
        << std::setw(10) << show(stat_or_nan(r.tpot_ms, &S::p90), 2) << std::setw(10) << show(stat_or_nan(r.tpot_ms, &S::p99), 2)
        << std::setw(11) << show(stat_or_nan(r.e2el_ms, &S::p90), 1)
        << std::setw(10) << show(p.request_throughput, 3) << std::setw(10) << show(r.output_throughput, 1) << std::setw(10)
        << show(p.goodput, 3) << std::setw(6) << (p.has_slos ? (r.pass ? "yes" : "no") : "-") << std::setw(8)
        << show(p.cost_per_hour, 2) << "  " << (r.overloaded ? "OVERLOADED" : "ok") << "\n";
  }
  out << "(latencies in ms; " << points.size() << " points";
  const auto overloaded = std::count_if(points.begin(), points.end(), [](const SweepPoint& p) { return p.error.empty() && p.result.overloaded; });
  if (overloaded > 0) {
    out << "; OVERLOADED: the queue grew all along (simulate's warning), so those latencies measure the queue";
  }
  out << ")\n";
}

std::vector<std::string> sweep_warnings(const std::vector<VaryAxis>& axes, const std::vector<SweepPoint>& points) {
  std::vector<std::string> out;
  std::string overloaded;
  std::size_t count = 0;
  for (const SweepPoint& p : points) {
    if (!p.error.empty() || !p.result.overloaded) continue;
    ++count;
    std::string at;
    for (std::size_t i = 0; i < axes.size(); ++i) at += (i ? " " : "") + axes[i].key + "=" + p.values[i];
    if (count <= 4) overloaded += (count > 1 ? "; " : "") + at;
  }
  if (count > 0) {
    out.push_back("overloaded: " + std::to_string(count) + " of " + std::to_string(points.size()) + " points (" +
                  overloaded + (count > 4 ? "; ..." : "") +
                  ") served fewer requests per second than arrived and their queue grew all along: their latencies "
                  "measure the queue (status 'overloaded' in sweep.csv)");
  }
  for (std::size_t a = 0; a < axes.size(); ++a) {
    // The row of the first point seen for each setting of the other axes.
    std::map<std::vector<std::string>, std::vector<std::string>> row_of_others;
    bool compared = false, changed = false;
    for (const SweepPoint& p : points) {
      if (!p.error.empty()) continue;
      std::vector<std::string> others = p.values;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(a));
      const std::vector<std::string> row = point_cells(p);
      const auto [it, first] = row_of_others.emplace(std::move(others), row);
      if (first) continue;
      compared = true;
      changed = changed || it->second != row;
    }
    if (compared && !changed) {
      out.push_back("--vary " + axes[a].key + " changed no figure: each of its values gave the same row. The trace or "
                    "configuration does not exercise it (e.g. prefix caching on a trace without prefix hash ids)");
    }
  }
  return out;
}

}  // namespace twin
