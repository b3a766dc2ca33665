#include "planner/planner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.hpp"
#include "metrics/summary_json.hpp"
#include "planner/client_run.hpp"
#include "planner/quiet_cache_run.hpp"
#include "planner/slo_reach.hpp"
#include "planner/thread_pool.hpp"
#include "planner/vllm_command.hpp"
#include "sim/cluster.hpp"
#include "sim/run.hpp"

namespace twin {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The latency axis of the plan: the first SLO with a percentile, else E2E p90.
struct LatencyAxis {
  std::string name = "e2el_p90";
  int slo_index = -1;
};

LatencyAxis latency_axis(const std::vector<Slo>& slos) {
  LatencyAxis axis;
  for (std::size_t i = 0; i < slos.size(); ++i) {
    if (slos[i].percentile > 0) {
      const std::string text = format_slo(slos[i]);
      axis.name = text.substr(0, text.find("<="));
      axis.slo_index = static_cast<int>(i);
      break;
    }
  }
  return axis;
}

double axis_value(const LatencyAxis& axis, const ProbeResult& p) {
  if (axis.slo_index >= 0 && static_cast<std::size_t>(axis.slo_index) < p.slo_measured_ms.size()) {
    return p.slo_measured_ms[static_cast<std::size_t>(axis.slo_index)];
  }
  return stat_or_nan(p.e2el_ms, &LatencyStats::p90);
}

// Prompt length the TTFT floor is quoted at: the first TTFT SLO's percentile
// of the trace's prompts (p90 without one).
std::int32_t floor_prompt_len(const LoadedTrace& trace, const std::vector<Slo>& slos) {
  double p = 90;
  for (const auto& s : slos) {
    if (s.metric == Metric::ttft && s.percentile > 0) {
      p = s.percentile;
      break;
    }
  }
  return prompt_len_percentile(trace, p);
}

// Full precision, unlike the outputs' json_figure: a probe read back
// (probe_from: across MPI ranks and resumed plans) must equal the one
// computed in place, or the search would take another path.
nlohmann::ordered_json num(double x) { return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr); }
double num_from(const nlohmann::json& j) { return j.is_null() ? kNaN : j.get<double>(); }

nlohmann::ordered_json probe_json(const ProbeResult& p) {
  nlohmann::ordered_json j;
  j["rate"] = num(p.rate);
  j["pass"] = p.pass;
  nlohmann::ordered_json measured = nlohmann::ordered_json::array(), fraction = nlohmann::ordered_json::array();
  for (double x : p.slo_measured_ms) measured.push_back(num(x));
  for (double x : p.slo_fraction_met) fraction.push_back(num(x));
  j["slo_measured_ms"] = std::move(measured);
  j["slo_fraction_met"] = std::move(fraction);
  j["ttft_ms"] = latency_stats_json(p.ttft_ms, Figures::exact);
  j["tpot_ms"] = latency_stats_json(p.tpot_ms, Figures::exact);
  j["e2el_ms"] = latency_stats_json(p.e2el_ms, Figures::exact);
  j["output_throughput"] = num(p.output_throughput);
  j["completed"] = p.completed;
  j["rejected"] = p.rejected;
  j["aborted"] = p.aborted;
  j["unserved"] = p.unserved;
  j["worst_ratio"] = num(p.worst_ratio);
  j["above_saturation"] = p.above_saturation;
  j["overloaded"] = p.overloaded;
  if (p.peak_in_flight > 0) j["peak_in_flight"] = p.peak_in_flight;  // with clients only: old plans' bytes stay
  j["joules_per_output_token"] = num(p.joules_per_output_token);
  return j;
}

ProbeResult probe_from(const nlohmann::json& j) {
  ProbeResult p;
  p.rate = num_from(j.at("rate"));
  p.pass = j.at("pass").get<bool>();
  for (const auto& x : j.at("slo_measured_ms")) p.slo_measured_ms.push_back(num_from(x));
  for (const auto& x : j.at("slo_fraction_met")) p.slo_fraction_met.push_back(num_from(x));
  p.ttft_ms = latency_stats_from_json(j.at("ttft_ms"));
  p.tpot_ms = latency_stats_from_json(j.at("tpot_ms"));
  p.e2el_ms = latency_stats_from_json(j.at("e2el_ms"));
  p.output_throughput = num_from(j.at("output_throughput"));
  p.completed = j.at("completed").get<std::uint64_t>();
  p.rejected = j.at("rejected").get<std::uint64_t>();
  p.aborted = j.at("aborted").get<std::uint64_t>();
  p.unserved = j.at("unserved").get<std::uint64_t>();
  p.worst_ratio = num_from(j.at("worst_ratio"));
  p.above_saturation = j.value("above_saturation", false);
  p.overloaded = j.value("overloaded", false);
  p.peak_in_flight = j.value("peak_in_flight", std::int64_t{0});
  p.joules_per_output_token = j.contains("joules_per_output_token") ? num_from(j.at("joules_per_output_token")) : kNaN;
  return p;
}

CandidateStatus status_from(const std::string& s) {
  for (auto st : {CandidateStatus::ok, CandidateStatus::pruned, CandidateStatus::slo_unmet, CandidateStatus::verify_failed,
                  CandidateStatus::over_max_gpus, CandidateStatus::over_budget, CandidateStatus::over_power_budget}) {
    if (status_name(st) == s) return st;
  }
  throw Error("plan result: unknown status " + s);
}

}  // namespace

std::string_view status_name(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::ok: return "ok";
    case CandidateStatus::pruned: return "pruned";
    case CandidateStatus::slo_unmet: return "slo_unmet";
    case CandidateStatus::verify_failed: return "verify_failed";
    case CandidateStatus::over_max_gpus: return "over_max_gpus";
    case CandidateStatus::over_budget: return "over_budget";
    case CandidateStatus::over_power_budget: return "over_power_budget";
  }
  return "?";
}

double planned_rate(const LoadedTrace& trace, const PlanOptions& o) {
  return o.target_rate > 0 ? o.target_rate : arrival_rate(trace, o.verify_requests);
}

void check_plan_options(const PlanOptions& o) {
  if (o.target_rate != 0 && !(std::isfinite(o.target_rate) && o.target_rate > 0)) {
    throw UsageError("--target-rate: expected a positive number of requests per second");
  }
  if (parse_slos(o.slos).empty()) throw UsageError("--slo: plan needs at least one SLO, e.g. 'ttft_p90<=2s,tpot_p99<=100ms'");
  check_search_space(o.space);
  if (!(o.capacity.tolerance > 0 && o.capacity.tolerance < 1)) throw UsageError("--tolerance: expected a number in (0, 1)");
  if (o.space.budget && !(*o.space.budget > 0)) throw UsageError("--budget: expected a positive number ($ per hour)");
  if (o.space.max_gpus && *o.space.max_gpus < 1) throw UsageError("--max-gpus: expected a positive integer");
  if (o.capacity.clients.at_once) {
    throw UsageError("--request-rate inf: plan sizes a deployment for an arrival rate, and inf sends every request at "
                     "once; for a closed loop's throughput-latency curve use `sweep --request-rate inf "
                     "--max-concurrency 1,4,16,64`");
  }
  if (o.space.power_budget_w && !(std::isfinite(*o.space.power_budget_w) && *o.space.power_budget_w > 0))
    throw UsageError("--max-power-kw: expected a positive number of kilowatts");
  if (!(std::isfinite(o.energy_price_per_kwh) && o.energy_price_per_kwh >= 0))
    throw UsageError("--energy-price: expected a number >= 0 ($ per kWh)");
}

namespace {
// --max-power-kw against `gpus` at their max board power; the reason when
// over (or when the profile has no power figures to check), else empty.
std::string over_power_budget(const CandidateResult& r, std::int32_t gpus, const PlanOptions& o) {
  if (!o.space.power_budget_w) return "";
  if (std::isnan(r.max_power_per_gpu_w))
    return "hardware " + r.candidate.hardware + " has no power figures, so --max-power-kw cannot be checked";
  const double watts = gpus * r.max_power_per_gpu_w;
  if (watts <= *o.space.power_budget_w) return "";
  char kw[32];
  std::snprintf(kw, sizeof kw, "%.3f", *o.space.power_budget_w / 1000.0);
  return "needs " + std::to_string(gpus) + " GPUs of " + std::to_string(static_cast<long>(r.max_power_per_gpu_w)) +
         " W, " + std::to_string(static_cast<long>(watts)) + " W provisioned, over --max-power-kw " + kw;
}
}  // namespace


namespace {

// One replica's hardware figures and memory plan; false (the reason set)
// when the layout, the memory plan or the knobs rule the candidate out.
bool read_one_replica(const ClusterConfig& one, CandidateResult& r) {
  try {
    const Cluster cluster = build_cluster(one);
    r.price_per_gpu_hour = cluster.groups.front().hardware.price_per_gpu_hour;
    r.num_gpu_blocks = cluster.groups.front().memory.num_blocks;
    r.max_model_len = cluster.groups.front().replica.scheduler.max_model_len;
    const PowerDesc& power = cluster.groups.front().hardware.power;
    if (power.known) r.max_power_per_gpu_w = power.max_w;
  } catch (const Error& e) {
    r.reason = e.what();
    return false;
  }
  return true;
}

// The cluster check's rate and pacing, and what it costs at n replicas.
struct VerifyLoad {
  double rate = 0;     // req/s the plan is for
  double speedup = 1;  // the trace's arrival times scaled to it
  double mean_out = 0; // output tokens per request
};

// The GPUs' price plus, with --energy-price, the electricity the last
// cluster check drew (its average power; 0 while none ran or the energy is
// not known, and the plan says so).
void price_at(CandidateResult& r, std::int32_t replicas, const VerifyLoad& load, double energy_price_per_kwh) {
  r.replicas = replicas;
  r.gpus = replicas * r.gpus_per_replica;
  r.gpu_cost_per_hour = r.gpus * r.price_per_gpu_hour;
  r.energy_cost_per_hour = energy_price_per_kwh > 0 && std::isfinite(r.average_power_w)
                               ? r.average_power_w / 1000.0 * energy_price_per_kwh
                               : 0;
  r.cost_per_hour = r.gpu_cost_per_hour + r.energy_cost_per_hour;
  const double tokens_per_hour = load.rate * load.mean_out * 3600.0;
  r.cost_per_m_output_tokens = tokens_per_hour > 0 ? r.cost_per_hour / tokens_per_hour * 1e6 : kNaN;
  r.provisioned_power_w = r.gpus * r.max_power_per_gpu_w;
}

// Replays the trace on the estimated number of replicas, then one more at a
// time, until the cluster meets the SLOs or a limit (GPUs, power, extra
// replicas) stops it; sets the status and the figures of the last check.
void verify_replicas(const Candidate& c, const LoadedTrace& trace, const PlanOptions& o, LatencyAxis axis,
                     const VerifyLoad& load, CandidateResult& r) {
  price_at(r, r.replicas_estimated, load, o.energy_price_per_kwh);
  r.latency_ms = kNaN;
  r.status = CandidateStatus::verify_failed;
  for (std::int32_t n = r.replicas_estimated; n <= r.replicas_estimated + o.max_extra_replicas; ++n) {
    if (o.space.max_gpus && n * r.gpus_per_replica > *o.space.max_gpus) {
      price_at(r, n, load, o.energy_price_per_kwh);
      r.status = CandidateStatus::over_max_gpus;
      r.reason = "needs " + std::to_string(n * r.gpus_per_replica) + " GPUs or more, --max-gpus is " +
                 std::to_string(*o.space.max_gpus);
      return;
    }
    if (std::string why = over_power_budget(r, n * r.gpus_per_replica, o); !why.empty()) {
      price_at(r, n, load, o.energy_price_per_kwh);
      r.status = CandidateStatus::over_power_budget;
      r.reason = std::move(why);
      return;
    }
    const ClientRun sent = run_scaled_trace(candidate_config(c, n, o.slos, o.seed), trace, o.verify_requests, load.speedup,
                                            o.capacity.clients, o.capacity.skip_unused_prefix_cache)
                               .sent;
    r.verify.push_back({n, judge(sent.run.summary, sent.run.stats.unserved, load.rate)});
    r.verify.back().result.peak_in_flight = sent.peak_in_flight;
    r.latency_ms = axis_value(axis, r.verify.back().result);
    const EnergySummary& energy = sent.run.summary.energy;
    r.average_power_w = energy.known ? energy.average_power_w : kNaN;
    r.joules_per_output_token = energy.known ? energy.joules_per_output_token : kNaN;
    price_at(r, n, load, o.energy_price_per_kwh);
    if (r.verify.back().result.pass) {
      r.status = CandidateStatus::ok;
      r.reason.clear();
      return;
    }
  }
  r.reason = "the cluster misses the SLOs on the trace even with " + std::to_string(r.replicas) + " replicas";
}

}  // namespace

CandidateResult evaluate_candidate(const Candidate& c, const LoadedTrace& trace, const PlanOptions& o) {
  CandidateResult r;
  r.candidate = c;
  // A disaggregated candidate's "replica" is a unit of its two pools.
  r.gpus_per_replica = c.tp * c.pp * c.ep * c.replicas_per_unit();
  if (o.space.max_gpus && r.gpus_per_replica > *o.space.max_gpus) {
    r.reason = "needs " + std::to_string(r.gpus_per_replica) + " GPUs per replica, more than --max-gpus " +
               std::to_string(*o.space.max_gpus);
    return r;
  }
  const ClusterConfig one = candidate_config(c, 1, o.slos, o.seed);
  if (!read_one_replica(one, r)) return r;
  if (std::string why = over_power_budget(r, r.gpus_per_replica, o); !why.empty()) {
    r.reason = std::move(why);
    return r;
  }
  const std::vector<Slo> slos = parse_slos(o.slos);
  const LatencyAxis axis = latency_axis(slos);
  const std::int32_t mean_out = static_cast<std::int32_t>(std::lround(mean_output_tokens(trace)));
  r.floor = latency_floor(one, floor_prompt_len(trace, slos), mean_out);
  r.has_floor = true;

  // The earlier search had no early rejection: it reproduces those plans.
  const bool reject_early = o.capacity.search != CapacitySearch::doubling;
  if (auto out_of_reach = reject_early ? unreachable_slo(one, trace, o.capacity.probe_requests, slos, o.capacity.clients)
                                       : std::nullopt) {
    r.status = CandidateStatus::slo_unmet;
    r.reason = std::move(out_of_reach->reason);
    r.rejected_before_probing = true;
    r.zero_load_ratio = out_of_reach->ratio;
    r.latency_ms = kNaN;
    return r;
  }
  CapacityOptions copt = o.capacity;
  // The doubling search starts where the answer is expected, at the rate
  // planned for; both searches give up below 1/2^steps of it.
  copt.start_rate = o.target_rate > 0 ? o.target_rate : arrival_rate(trace);
  r.capacity = find_capacity(one, trace, copt);
  if (!r.capacity.feasible) {
    r.status = CandidateStatus::slo_unmet;
    r.reason = r.capacity.probes.empty()
                   ? "serves " + std::to_string(r.capacity.saturated_rps) + " req/s saturated, below the lowest rate searched"
                   : "misses the SLOs even at " + std::to_string(r.capacity.probes.back().rate) + " req/s";
    r.latency_ms = kNaN;
    return r;
  }
  VerifyLoad load;
  load.rate = planned_rate(trace, o);
  // The cluster check replays the trace at the planned rate: its own
  // arrival times (speedup 1) without --target-rate.
  load.speedup = o.target_rate > 0 ? o.target_rate / arrival_rate(trace, o.verify_requests) : 1.0;
  load.mean_out = mean_output_tokens(trace, o.verify_requests);
  const double capacity_tokens_per_hour = r.capacity.capacity * load.mean_out * 3600.0;
  r.cost_per_m_output_tokens_at_capacity =
      capacity_tokens_per_hour > 0 ? r.gpus_per_replica * r.price_per_gpu_hour / capacity_tokens_per_hour * 1e6 : kNaN;
  r.replicas_estimated = std::max<std::int32_t>(1, static_cast<std::int32_t>(std::ceil(load.rate / r.capacity.capacity - 1e-9)));
  verify_replicas(c, trace, o, axis, load, r);
  if (r.status == CandidateStatus::ok && o.space.budget && r.cost_per_hour > *o.space.budget) {
    r.status = CandidateStatus::over_budget;
    r.reason = "costs more than --budget";
  }
  return r;
}

std::vector<Candidate> plan_candidates(const PlanOptions& o) { return enumerate_candidates(o.space); }

std::vector<CandidateResult> evaluate_some(const std::vector<Candidate>& candidates, const std::vector<std::size_t>& which,
                                           const LoadedTrace& trace, const PlanOptions& o) {
  std::vector<CandidateResult> all(candidates.size());
  std::vector<char> evaluated(candidates.size(), 0);
  parallel_for(
      which, o.jobs,
      [&](std::size_t i) {
        if (o.stop && o.stop()) return;
        all[i] = evaluate_candidate(candidates[i], trace, o);
        evaluated[i] = 1;
      },
      o.progress);
  std::vector<CandidateResult> out;
  for (std::size_t i : which) {
    if (evaluated[i]) out.push_back(std::move(all[i]));
  }
  return out;
}

PlanResult assemble_plan(const LoadedTrace& trace, const PlanOptions& o, std::vector<CandidateResult> results) {
  const std::vector<Slo> slos = parse_slos(o.slos);
  PlanResult p;
  p.trace_path = trace.path;
  p.trace_requests = trace.requests.size();
  p.probe_requests = o.capacity.probe_requests == 0 ? trace.requests.size()
                                                    : std::min(o.capacity.probe_requests, trace.requests.size());
  p.verify_requests = o.verify_requests == 0 ? trace.requests.size() : std::min(o.verify_requests, trace.requests.size());
  p.trace_rate = arrival_rate(trace, o.verify_requests);
  p.planned_rate = planned_rate(trace, o);
  p.rate_is_target = o.target_rate > 0;
  p.mean_output_tokens = mean_output_tokens(trace, o.verify_requests);
  p.slos = format_slos(slos);
  p.latency_metric = latency_axis(slos).name;
  p.tolerance = o.capacity.tolerance;
  p.capacity_search = o.capacity.search;
  p.prompt_len_for_floor = floor_prompt_len(trace, slos);
  std::sort(results.begin(), results.end(),
            [](const CandidateResult& a, const CandidateResult& b) { return a.candidate.index < b.candidate.index; });
  p.candidates = std::move(results);

  auto latency_key = [](double x) { return std::isnan(x) ? std::numeric_limits<double>::infinity() : x; };
  for (std::size_t i = 0; i < p.candidates.size(); ++i) {
    if (p.candidates[i].status == CandidateStatus::ok) p.ranking.push_back(i);
  }
  std::stable_sort(p.ranking.begin(), p.ranking.end(), [&](std::size_t a, std::size_t b) {
    const auto &x = p.candidates[a], &y = p.candidates[b];
    if (x.cost_per_hour != y.cost_per_hour) return x.cost_per_hour < y.cost_per_hour;
    return latency_key(x.latency_ms) < latency_key(y.latency_ms);
  });
  if (!p.ranking.empty()) {
    p.chosen = static_cast<std::int64_t>(p.ranking.front());
    p.chosen_vllm_serve = vllm_serve_command(p.candidates[p.ranking.front()].candidate);
  }
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i : p.ranking) {
    const double l = latency_key(p.candidates[i].latency_ms);
    if (l < best) {
      p.pareto.push_back(i);
      best = l;
    }
  }
  if (p.ranking.empty()) {
    // Nearest misses: sized candidates (cheapest first), then those that miss
    // the SLOs even alone (smallest excess over the thresholds first).
    std::vector<std::size_t> near;
    for (std::size_t i = 0; i < p.candidates.size(); ++i) {
      if (p.candidates[i].status != CandidateStatus::pruned) near.push_back(i);
    }
    auto miss = [&](std::size_t i) {
      const auto& c = p.candidates[i];
      if (c.status != CandidateStatus::slo_unmet) return std::pair<int, double>{0, c.cost_per_hour};
      double w = c.rejected_before_probing ? c.zero_load_ratio : std::numeric_limits<double>::infinity();
      for (const auto& pr : c.capacity.probes) w = std::min(w, pr.worst_ratio);
      return std::pair<int, double>{1, w};
    };
    std::stable_sort(near.begin(), near.end(), [&](std::size_t a, std::size_t b) { return miss(a) < miss(b); });
    if (near.size() > 3) near.resize(3);
    p.closest = std::move(near);
  }
  return p;
}

PlanResult run_plan(const LoadedTrace& trace, const PlanOptions& o) {
  const std::vector<Candidate> candidates = plan_candidates(o);
  std::vector<std::size_t> all(candidates.size());
  std::iota(all.begin(), all.end(), 0);
  return assemble_plan(trace, o, evaluate_some(candidates, all, trace, o));
}

OverloadCount overload_count(const CandidateResult& r) {
  OverloadCount n;
  for (const ProbeResult& p : r.capacity.probes) n.overloaded += p.overloaded;
  for (const VerifyRun& v : r.verify) n.overloaded += v.result.overloaded;
  n.runs = r.capacity.probes.size() + r.verify.size();
  return n;
}

nlohmann::ordered_json candidate_result_json(const CandidateResult& r) {
  nlohmann::ordered_json j;
  j["candidate"] = candidate_json(r.candidate);
  j["status"] = std::string(status_name(r.status));
  j["reason"] = r.reason;
  j["gpus_per_replica"] = r.gpus_per_replica;
  j["price_per_gpu_hour"] = num(r.price_per_gpu_hour);
  j["num_gpu_blocks"] = r.num_gpu_blocks;
  j["max_model_len"] = r.max_model_len;
  j["capacity_rps"] = num(r.capacity.capacity);
  j["capacity_upper_rps"] = num(r.capacity.upper);
  j["saturated_rps"] = num(r.capacity.saturated_rps);
  j["capacity_feasible"] = r.capacity.feasible;
  j["replicas_estimated"] = r.replicas_estimated;
  j["replicas"] = r.replicas;
  j["gpus"] = r.gpus;
  j["cost_per_hour"] = num(r.cost_per_hour);
  j["gpu_cost_per_hour"] = num(r.gpu_cost_per_hour);
  j["energy_cost_per_hour"] = num(r.energy_cost_per_hour);
  j["cost_per_m_output_tokens"] = num(r.cost_per_m_output_tokens);
  j["cost_per_m_output_tokens_at_capacity"] = num(r.cost_per_m_output_tokens_at_capacity);
  j["latency_ms"] = num(r.latency_ms);
  j["max_power_per_gpu_w"] = num(r.max_power_per_gpu_w);
  j["provisioned_power_w"] = num(r.provisioned_power_w);
  j["average_power_w"] = num(r.average_power_w);
  j["joules_per_output_token"] = num(r.joules_per_output_token);
  if (r.has_floor) {
    j["floor"] = {{"prompt_len", r.floor.prompt_len}, {"ttft_ms", num(r.floor.ttft_ms)}, {"tpot_ms", num(r.floor.tpot_ms)}};
  } else {
    j["floor"] = nullptr;
  }
  nlohmann::ordered_json probes = nlohmann::ordered_json::array();
  for (const auto& p : r.capacity.probes) probes.push_back(probe_json(p));
  j["probes"] = std::move(probes);
  nlohmann::ordered_json verify = nlohmann::ordered_json::array();
  for (const auto& v : r.verify) {
    nlohmann::ordered_json x = probe_json(v.result);
    x["replicas"] = v.replicas;
    verify.push_back(std::move(x));
  }
  j["verify"] = std::move(verify);
  j["overloaded_runs"] = overload_count(r).overloaded;  // derived: the probes' and checks' flags
  if (r.rejected_before_probing) {  // only where it happened
    j["rejected_before_probing"] = true;
    j["zero_load_ratio"] = num(r.zero_load_ratio);
  }
  return j;
}

CandidateResult candidate_result_from_json(const nlohmann::json& j) {
  CandidateResult r;
  const auto& c = j.at("candidate");
  r.candidate.index = c.at("index").get<std::int32_t>();
  r.candidate.model = c.at("model").get<std::string>();
  r.candidate.dtype = c.at("dtype").get<std::string>();
  r.candidate.quantization = c.value("quantization", std::string());
  r.candidate.kv_dtype = c.value("kv_dtype", std::string());
  r.candidate.hardware = c.at("hardware").get<std::string>();
  r.candidate.tp = c.at("tp").get<std::int32_t>();
  r.candidate.pp = c.at("pp").get<std::int32_t>();
  r.candidate.ep = c.value("ep", 1);
  r.candidate.prefill = c.value("prefill_replicas", 0);
  r.candidate.decode = c.value("decode_replicas", 0);
  r.candidate.kv_dram_gib = c.value("kv_dram_gib", 0.0);
  r.candidate.preset = c.at("preset").get<std::string>();
  r.candidate.max_num_batched_tokens = c.at("max_num_batched_tokens").is_null() ? 0 : c.at("max_num_batched_tokens").get<std::int32_t>();
  r.candidate.max_num_seqs = c.at("max_num_seqs").is_null() ? 0 : c.at("max_num_seqs").get<std::int32_t>();
  r.candidate.router = c.at("router").get<std::string>();
  if (c.contains("max_model_len")) {
    const auto& m = c.at("max_model_len");
    r.candidate.max_model_len = m.is_string() ? kMaxModelLenAuto : m.get<std::int32_t>();
  }
  r.status = status_from(j.at("status").get<std::string>());
  r.reason = j.at("reason").get<std::string>();
  r.gpus_per_replica = j.at("gpus_per_replica").get<std::int32_t>();
  r.price_per_gpu_hour = num_from(j.at("price_per_gpu_hour"));
  r.num_gpu_blocks = j.at("num_gpu_blocks").get<std::int32_t>();
  r.max_model_len = j.value("max_model_len", 0);
  r.capacity.capacity = num_from(j.at("capacity_rps"));
  r.capacity.upper = num_from(j.at("capacity_upper_rps"));
  r.capacity.saturated_rps = j.contains("saturated_rps") ? num_from(j.at("saturated_rps")) : 0;
  r.capacity.feasible = j.at("capacity_feasible").get<bool>();
  r.replicas_estimated = j.at("replicas_estimated").get<std::int32_t>();
  r.replicas = j.at("replicas").get<std::int32_t>();
  r.gpus = j.at("gpus").get<std::int32_t>();
  r.cost_per_hour = num_from(j.at("cost_per_hour"));
  // Plans written before issue 44's energy price: the GPUs were the cost.
  r.gpu_cost_per_hour = j.contains("gpu_cost_per_hour") ? num_from(j.at("gpu_cost_per_hour")) : r.cost_per_hour;
  r.energy_cost_per_hour = j.contains("energy_cost_per_hour") ? num_from(j.at("energy_cost_per_hour")) : 0;
  r.cost_per_m_output_tokens = num_from(j.at("cost_per_m_output_tokens"));
  r.cost_per_m_output_tokens_at_capacity = num_from(j.at("cost_per_m_output_tokens_at_capacity"));
  r.latency_ms = num_from(j.at("latency_ms"));
  for (const auto& [key, member] : {std::pair{"max_power_per_gpu_w", &CandidateResult::max_power_per_gpu_w},
                                    std::pair{"provisioned_power_w", &CandidateResult::provisioned_power_w},
                                    std::pair{"average_power_w", &CandidateResult::average_power_w},
                                    std::pair{"joules_per_output_token", &CandidateResult::joules_per_output_token}}) {
    r.*member = j.contains(key) ? num_from(j.at(key)) : kNaN;
  }
  if (!j.at("floor").is_null()) {
    r.has_floor = true;
    r.floor.prompt_len = j.at("floor").at("prompt_len").get<std::int32_t>();
    r.floor.ttft_ms = num_from(j.at("floor").at("ttft_ms"));
    r.floor.tpot_ms = num_from(j.at("floor").at("tpot_ms"));
  }
  r.rejected_before_probing = j.value("rejected_before_probing", false);
  r.zero_load_ratio = j.contains("zero_load_ratio") ? num_from(j.at("zero_load_ratio")) : kNaN;
  for (const auto& p : j.at("probes")) r.capacity.probes.push_back(probe_from(p));
  for (const auto& v : j.at("verify")) r.verify.push_back({v.at("replicas").get<std::int32_t>(), probe_from(v)});
  return r;
}

}  // namespace twin
