#include "planner/plan_report.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "base/error.hpp"
#include "metrics/output_dir.hpp"
#include "planner/plan_html.hpp"

namespace twin {
namespace {

std::string fixed(double x, int decimals) {
  if (!std::isfinite(x)) return "-";
  std::ostringstream s;
  s.imbue(std::locale::classic());
  s << std::fixed << std::setprecision(decimals) << x;
  return s.str();
}

// CSV cells: empty for no value; labels have no commas or quotes.
std::string cell(double x, int decimals) { return std::isfinite(x) ? fixed(x, decimals) : ""; }

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out + "\"";
}

std::string slo_cells(const PlanResult& plan, const CandidateResult& c) {
  // The SLO metrics at the chosen point: the passing (last) cluster check.
  std::string out;
  const std::size_t n = plan.slos.empty() ? 0 : static_cast<std::size_t>(std::count(plan.slos.begin(), plan.slos.end(), ',') + 1);
  for (std::size_t i = 0; i < n; ++i) {
    double v = std::nan("");
    if (!c.verify.empty() && i < c.verify.back().result.slo_measured_ms.size()) v = c.verify.back().result.slo_measured_ms[i];
    out += ',';
    out += cell(v, 3);
  }
  return out;
}

// "2/9": overloaded runs of all the candidate's runs; "-" without runs.
std::string overload_cell(const CandidateResult& c) {
  const OverloadCount n = overload_count(c);
  return n.runs == 0 ? "-" : std::to_string(n.overloaded) + "/" + std::to_string(n.runs);
}

// The search space as plan.json records it.
nlohmann::ordered_json search_json(const SearchSpace& space) {
  nlohmann::ordered_json search;
  search["model"] = space.model;
  search["dtype"] = space.dtype;
  // Only where given: other plans' files stay as they were.
  if (!space.quantization.empty()) search["quantization"] = space.quantization;
  if (!space.kv_dtype.empty()) search["kv_dtype"] = space.kv_dtype;
  search["hardware"] = space.hardware;
  search["tp"] = space.tp;
  search["pp"] = space.pp;
  // The dimensions of #19 only where searched: other plans' files stay as they were.
  if (space.ep != std::vector<std::int32_t>{1}) search["ep"] = space.ep;
  if (space.pd != std::vector<std::pair<std::int32_t, std::int32_t>>{{0, 0}}) {
    nlohmann::ordered_json pd = nlohmann::ordered_json::array();
    for (const auto& [p, d] : space.pd) pd.push_back(p == 0 ? std::string("none") : std::to_string(p) + ":" + std::to_string(d));
    search["pd"] = std::move(pd);
  }
  if (space.kv_dram_gib != std::vector<double>{0}) search["kv_dram_gib"] = space.kv_dram_gib;
  search["preset"] = space.presets;
  search["max_num_batched_tokens"] = space.max_num_batched_tokens;
  search["max_num_seqs"] = space.max_num_seqs;
  search["router"] = space.routers;
  // Only where given: other plans' files stay as they were.
  if (space.max_model_len == kMaxModelLenAuto) search["max_model_len"] = "auto";
  if (space.max_model_len > 0) search["max_model_len"] = space.max_model_len;
  search["max_gpus"] = space.max_gpus ? nlohmann::ordered_json(*space.max_gpus) : nullptr;
  search["budget"] = space.budget ? nlohmann::ordered_json(*space.budget) : nullptr;
  return search;
}

}  // namespace

nlohmann::ordered_json plan_json(const PlanResult& p, const PlanOptions& o) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json trace;
  trace["path"] = p.trace_path;
  trace["requests"] = p.trace_requests;
  trace["rate_rps"] = p.trace_rate;
  trace["mean_output_tokens"] = p.mean_output_tokens;
  trace["probe_requests"] = p.probe_requests;
  trace["verify_requests"] = p.verify_requests;
  trace["floor_prompt_len"] = p.prompt_len_for_floor;
  j["trace"] = std::move(trace);
  if (p.interrupted) {  // a Ctrl-C: the candidates evaluated before it only
    j["interrupted"] = true;
    j["candidates_evaluated"] = p.candidates.size();
    j["candidates_enumerated"] = p.candidates_enumerated;
  }
  // The rate every candidate was sized and costed for: --target-rate's, or
  // the trace's own (then target_rate_rps is null).
  j["planned_rate_rps"] = p.planned_rate;
  j["target_rate_rps"] = p.rate_is_target ? nlohmann::ordered_json(p.planned_rate) : nlohmann::ordered_json(nullptr);
  j["slos"] = p.slos;
  j["latency_metric"] = p.latency_metric;
  j["search"] = search_json(o.space);
  // How every run's requests were sent, only with clients: other plans' files stay as they were.
  if (const ClientOptions& k = o.capacity.clients; k.any()) {
    nlohmann::ordered_json clients;
    if (k.max_concurrency > 0) clients["max_concurrency"] = k.max_concurrency;
    if (k.sessions) clients["sessions"] = true;
    if (k.think_time) clients["think_time_s"] = to_seconds(*k.think_time);
    j["clients"] = std::move(clients);
  }
  nlohmann::ordered_json method;
  method["tolerance"] = p.tolerance;
  method["capacity_search"] = std::string(capacity_search_name(p.capacity_search));
  method["max_bracket_steps"] = o.capacity.max_bracket_steps;
  method["max_extra_replicas"] = o.max_extra_replicas;
  method["seed"] = o.seed;
  j["method"] = std::move(method);
  j["feasible"] = p.chosen >= 0;
  j["chosen"] = p.chosen >= 0 ? candidate_result_json(p.candidates[static_cast<std::size_t>(p.chosen)]) : nlohmann::ordered_json(nullptr);
  j["chosen_vllm_serve"] = p.chosen >= 0 ? nlohmann::ordered_json(p.chosen_vllm_serve) : nlohmann::ordered_json(nullptr);
  j["ranking"] = p.ranking;
  j["pareto"] = p.pareto;
  j["closest"] = p.closest;
  nlohmann::ordered_json candidates = nlohmann::ordered_json::array(), pruned = nlohmann::ordered_json::array();
  for (const auto& c : p.candidates) {
    if (c.status == CandidateStatus::pruned) {
      pruned.push_back({{"candidate", candidate_json(c.candidate)}, {"reason", c.reason}});
    } else {
      candidates.push_back(candidate_result_json(c));
    }
  }
  j["candidates"] = std::move(candidates);
  j["pruned"] = std::move(pruned);
  return j;
}

void write_plan_csv(std::ostream& out, const PlanResult& p) {
  out << "rank,index,label,hardware,tp,pp,preset,max_num_batched_tokens,max_num_seqs,router,status,capacity_rps,"
         "replicas,gpus,cost_per_hour,cost_per_m_output_tokens,cost_per_m_output_tokens_at_capacity,latency_ms,"
         "planned_rate_rps,overloaded_runs,provisioned_power_w,average_power_w,joules_per_output_token,gpu_cost_per_hour,"
         "energy_cost_per_hour";
  std::string slos = p.slos;
  std::size_t start = 0;
  while (!slos.empty()) {
    const std::size_t comma = slos.find(',', start);
    out << "," << quote(slos.substr(start, comma - start) + " measured_ms");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  out << ",reason\n";
  std::vector<std::size_t> rank_of(p.candidates.size(), 0);
  for (std::size_t r = 0; r < p.ranking.size(); ++r) rank_of[p.ranking[r]] = r + 1;
  for (std::size_t i = 0; i < p.candidates.size(); ++i) {
    const CandidateResult& c = p.candidates[i];
    const Candidate& k = c.candidate;
    out << (rank_of[i] ? std::to_string(rank_of[i]) : "") << "," << k.index << "," << quote(candidate_label(k)) << ","
        << k.hardware << "," << k.tp << "," << k.pp << "," << k.preset << ","
        << (k.max_num_batched_tokens ? std::to_string(k.max_num_batched_tokens) : "") << ","
        << (k.max_num_seqs ? std::to_string(k.max_num_seqs) : "") << "," << k.router << "," << status_name(c.status) << ","
        << (c.capacity.feasible ? cell(c.capacity.capacity, 4) : "") << "," << (c.replicas ? std::to_string(c.replicas) : "")
        << "," << (c.gpus ? std::to_string(c.gpus) : "") << "," << (c.gpus ? cell(c.cost_per_hour, 2) : "") << ","
        << (c.gpus ? cell(c.cost_per_m_output_tokens, 4) : "") << "," << cell(c.cost_per_m_output_tokens_at_capacity, 4)
        << "," << cell(c.latency_ms, 3) << "," << cell(p.planned_rate, 4) << "," << overload_count(c).overloaded
        << "," << cell(c.provisioned_power_w, 1) << "," << cell(c.average_power_w, 1) << ","
        << cell(c.joules_per_output_token, 4) << "," << (c.gpus ? cell(c.gpu_cost_per_hour, 2) : "") << ","
        << (c.gpus ? cell(c.energy_cost_per_hour, 4) : "") << slo_cells(p, c) << ","
        << quote(c.reason) << "\n";
  }
}

void write_pareto_csv(std::ostream& out, const PlanResult& p) {
  out << "index,label,cost_per_hour,latency_ms\n";
  for (std::size_t i : p.pareto) {
    const auto& c = p.candidates[i];
    out << c.candidate.index << "," << quote(candidate_label(c.candidate)) << "," << cell(c.cost_per_hour, 2) << ","
        << cell(c.latency_ms, 3) << "\n";
  }
}

namespace {

// The trace, the planned rate, the SLOs and how capacities were searched.
void print_plan_header(std::ostream& out, const PlanResult& p) {
  out << "Trace: " << p.trace_path << ", " << p.trace_requests << " requests at " << fixed(p.trace_rate, 3)
      << " req/s, mean output " << fixed(p.mean_output_tokens, 1) << " tokens\n";
  if (p.rate_is_target) {
    out << "Planned for " << fixed(p.planned_rate, 3) << " req/s (--target-rate, " << fixed(p.planned_rate / p.trace_rate, 2)
        << "x the trace's rate): the trace's requests replayed at that rate\n";
  }
  out << "SLOs: " << p.slos << "; capacity probes use the first " << p.probe_requests << " requests, rates rescaled, "
      << (p.capacity_search == CapacitySearch::from_saturation ? "searched down from the saturated throughput"
                                                                : "bracketed by doubling from the planned rate")
      << ", tolerance " << fixed(p.tolerance * 100, 1) << "% (each capacity within " << fixed(p.tolerance * 100, 1)
      << "% of the lowest failing rate or of the saturated throughput); cluster check on " << p.verify_requests
      << " requests at " << (p.rate_is_target ? fixed(p.planned_rate, 3) + " req/s" : std::string("the trace's rate"))
      << "\n\n";
}

// Every candidate, ranked ones first, with its capacity, cost and status.
void print_plan_table(std::ostream& out, const PlanResult& p) {
  out << std::left << std::setw(5) << "rank" << std::setw(48) << "configuration" << std::right << std::setw(12)
      << "cap req/s" << std::setw(9) << "replicas" << std::setw(6) << "GPUs" << std::setw(10) << "$/h" << std::setw(10)
      << "$/Mtok" << std::setw(10) << "at cap" << std::setw(14) << (p.latency_metric + " ms") << std::setw(11)
      << "overloaded" << "  status\n";
  std::vector<std::size_t> order = p.ranking;
  for (std::size_t i = 0; i < p.candidates.size(); ++i) {
    const auto s = p.candidates[i].status;
    if (s != CandidateStatus::ok && s != CandidateStatus::pruned) order.push_back(i);
  }
  for (std::size_t r = 0; r < order.size(); ++r) {
    const auto& c = p.candidates[order[r]];
    const bool ranked = c.status == CandidateStatus::ok;
    out << std::left << std::setw(5) << (ranked ? std::to_string(r + 1) : "-") << std::setw(48) << candidate_label(c.candidate)
        << std::right << std::setw(12) << (c.capacity.feasible ? fixed(c.capacity.capacity, 3) : "-") << std::setw(9)
        << (c.replicas ? std::to_string(c.replicas) : "-") << std::setw(6) << (c.gpus ? std::to_string(c.gpus) : "-")
        << std::setw(10) << (c.gpus ? fixed(c.cost_per_hour, 2) : "-") << std::setw(10)
        << (c.gpus ? fixed(c.cost_per_m_output_tokens, 3) : "-") << std::setw(10)
        << (c.capacity.feasible ? fixed(c.cost_per_m_output_tokens_at_capacity, 3) : "-") << std::setw(14)
        << fixed(c.latency_ms, 1) << std::setw(11) << overload_cell(c) << "  " << status_name(c.status) << "\n";
  }
  out << "(overloaded: runs of the candidate, capacity probes and cluster checks, that simulate's overload warning "
         "flags, the queue growing all along; such a run fails its SLOs)\n";
}

// The candidates left out before probing: pruned, or an SLO out of reach.
void print_plan_exclusions(std::ostream& out, const PlanResult& p) {
  std::size_t pruned = 0;
  for (const auto& c : p.candidates) pruned += c.status == CandidateStatus::pruned;
  if (pruned) {
    out << "\nPruned (" << pruned << "):\n";
    for (const auto& c : p.candidates) {
      if (c.status == CandidateStatus::pruned) out << "  " << candidate_label(c.candidate) << ": " << c.reason << "\n";
    }
  }
  std::size_t rejected = 0;
  for (const auto& c : p.candidates) rejected += c.rejected_before_probing;
  if (rejected) {
    out << "\nRejected before any probe, an SLO out of reach at zero load (" << rejected << "):\n";
    for (const auto& c : p.candidates) {
      if (c.rejected_before_probing) out << "  " << candidate_label(c.candidate) << ": " << c.reason << "\n";
    }
  }
}

// The chosen deployment, its vLLM command and the Pareto front.
void print_plan_chosen(std::ostream& out, const PlanResult& p) {
  const auto& c = p.candidates[static_cast<std::size_t>(p.chosen)];
  out << "Chosen: " << c.replicas << " x " << candidate_label(c.candidate) << " = " << c.gpus << (c.gpus == 1 ? " GPU, $" : " GPUs, $")
      << fixed(c.cost_per_hour, 2) << "/h, $" << fixed(c.cost_per_m_output_tokens, 3) << " per million output tokens; "
      << p.latency_metric << " " << fixed(c.latency_ms, 1) << " ms\n";
  out << "On vLLM: " << c.replicas << (c.replicas == 1 ? " replica" : " replicas (data parallel, behind a " + c.candidate.router + " router)")
      << " of\n  " << p.chosen_vllm_serve << "\n";
  out << "Pareto front (cost vs " << p.latency_metric << "):";
  for (std::size_t i : p.pareto) {
    out << " [" << candidate_label(p.candidates[i].candidate) << ": $" << fixed(p.candidates[i].cost_per_hour, 2) << "/h, "
        << fixed(p.candidates[i].latency_ms, 1) << " ms]";
  }
  out << "\n";
}

// No candidate passed: the closest ones, with why they failed.
void print_plan_closest(std::ostream& out, const PlanResult& p) {
  out << "No candidate meets the SLOs " << p.slos << " within the limits given.";
  if (p.closest.empty()) {
    out << " Every candidate was pruned.\n";
    return;
  }
  out << " Closest:\n";
  for (std::size_t i : p.closest) {
    const auto& c = p.candidates[i];
    out << "  " << candidate_label(c.candidate) << " (" << status_name(c.status) << "): " << c.reason;
    if (c.has_floor) {
      out << "; zero-load floor of one replica: TTFT " << fixed(c.floor.ttft_ms, 1) << " ms for a " << c.floor.prompt_len
          << "-token prompt, TPOT " << fixed(c.floor.tpot_ms, 2) << " ms";
    }
    if (!c.capacity.probes.empty()) {
      const ProbeResult* low = &c.capacity.probes.front();
      for (const auto& pr : c.capacity.probes) if (pr.rate < low->rate) low = &pr;
      out << "; at " << fixed(low->rate, 4) << " req/s TTFT p90 " << fixed(stat_or_nan(low->ttft_ms, &LatencyStats::p90), 1) << " ms, TPOT p90 "
          << fixed(stat_or_nan(low->tpot_ms, &LatencyStats::p90), 2) << " ms";
    }
    out << "\n";
  }
}

}  // namespace

void print_plan(std::ostream& out, const PlanResult& p) {
  print_plan_header(out, p);
  print_plan_table(out, p);
  print_plan_exclusions(out, p);
  out << "\n";
  if (p.chosen >= 0) {
    print_plan_chosen(out, p);
  } else {
    print_plan_closest(out, p);
  }
}

const std::vector<std::string>& plan_files() {
  static const std::vector<std::string> files = {"plan.json", "plan.csv", "pareto.csv", "plan.html", "plan.gp",
                                                 "frontier.svg", "capacity.svg"};
  return files;
}

bool run_gnuplot(const std::string& script, const std::string& dir, std::string& why) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    why = "gnuplot is not installed: no plots (the tables are written)";
    return false;
  }
  if (!std::filesystem::exists(script)) {
    why = "plot script " + script + " not found: no plots";
    return false;
  }
  // Paths are passed quoted; a quote in them would break the command.
  if (dir.find('\'') != std::string::npos || script.find('\'') != std::string::npos) {
    why = "a quote in the output path: no plots";
    return false;
  }
  const std::string cmd = "gnuplot -e \"dir='" + dir + "'\" '" + script + "' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) {
    why = "cannot start gnuplot";
    return false;
  }
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) text += buf;
  if (pclose(pipe) != 0) {
    why = "gnuplot failed: " + text;
    return false;
  }
  return true;
}

std::string write_plan_outputs(const std::string& dir, bool overwrite, bool plots, const PlanResult& plan,
                               const PlanOptions& options) {
  OutputDir out(dir, overwrite, plan_files());
  {
    std::ofstream f = out.open("plan.json");
    f << plan_json(plan, options).dump(2) << "\n";
    if (!f) throw Error(dir + "/plan.json: write failed");
  }
  {
    std::ofstream f = out.open("plan.csv");
    write_plan_csv(f, plan);
    if (!f) throw Error(dir + "/plan.csv: write failed");
  }
  {
    std::ofstream f = out.open("pareto.csv");
    write_pareto_csv(f, plan);
    if (!f) throw Error(dir + "/pareto.csv: write failed");
  }
  {
    std::ofstream f = out.open("plan.html");
    f << plan_html(plan);
    if (!f) throw Error(dir + "/plan.html: write failed");
  }
  {
    // The script goes with the data, so the plots can be redrawn by hand.
    std::ofstream f = out.open("plan.gp");
    f << plan_plot_script();
    if (!f) throw Error(dir + "/plan.gp: write failed");
  }
  if (!plots) return "plots off (--no-plots)";
  std::string why;
  if (!run_gnuplot(dir + "/plan.gp", dir, why)) return why;
  return "wrote frontier.svg and capacity.svg";
}

}  // namespace twin
