#include "planner/plan_html.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "metrics/html_page.hpp"
#include "metrics/slo.hpp"
#include "metrics/svg_chart.hpp"

namespace twin {
namespace {

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

bool drawn(const CandidateResult& c) { return c.status != CandidateStatus::pruned && !c.capacity.probes.empty(); }

bool is_chosen(const PlanResult& p, const CandidateResult& c) {
  return p.chosen >= 0 && &p.candidates[static_cast<std::size_t>(p.chosen)] == &c;
}

// Latency at each probed rate for SLO k, probes sorted by rate.
ChartSpec latency_chart(const PlanResult& p, const Slo& slo, std::size_t k) {
  ChartSpec spec;
  const std::string name = format_slo(slo);
  spec.title = "Latency against offered load: " + name.substr(0, name.find("<="));
  spec.x_label = "offered load per replica (req/s)";
  spec.y_label = name.substr(0, name.find("<=")) + " (ms)";
  spec.log_y = true;
  for (const CandidateResult& c : p.candidates) {
    if (!drawn(c)) continue;
    std::vector<const ProbeResult*> probes;
    for (const ProbeResult& pr : c.capacity.probes) probes.push_back(&pr);
    std::stable_sort(probes.begin(), probes.end(), [](const ProbeResult* a, const ProbeResult* b) { return a->rate < b->rate; });
    ChartSeries series;
    series.name = candidate_label(c.candidate);
    series.emphasized = is_chosen(p, c);
    for (const ProbeResult* pr : probes) {
      if (k >= pr->slo_measured_ms.size()) continue;
      series.x.push_back(pr->rate);
      series.y.push_back(pr->slo_measured_ms[k]);
    }
    spec.series.push_back(std::move(series));
  }
  spec.lines.push_back({"SLO " + name, slo.threshold_ms});
  return spec;
}

// AIConfigurator's view: what a GPU serves against what a user sees, one
// point per probe, and the front no other point beats on both.
ChartSpec pareto_chart(const PlanResult& p) {
  ChartSpec spec;
  spec.title = "Throughput per GPU against speed per user";
  spec.x_label = "output tokens/s per user (1000 / mean TPOT)";
  spec.y_label = "output tokens/s per GPU";
  std::vector<std::pair<double, double>> all;
  for (const CandidateResult& c : p.candidates) {
    if (!drawn(c) || c.gpus_per_replica <= 0) continue;
    ChartSeries series;
    series.name = candidate_label(c.candidate);
    series.emphasized = is_chosen(p, c);
    series.lines = false;
    for (const ProbeResult& pr : c.capacity.probes) {
      if (pr.tpot_ms.count == 0 || !(pr.tpot_ms.mean > 0)) continue;
      series.x.push_back(1000.0 / pr.tpot_ms.mean);
      series.y.push_back(pr.output_throughput / c.gpus_per_replica);
      all.emplace_back(series.x.back(), series.y.back());
    }
    spec.series.push_back(std::move(series));
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second > b.second); });
  ChartSeries front;
  front.name = "Pareto front";
  front.color = "#000000";  // the candidates keep the colours of the latency charts
  double best = -1;
  for (const auto& [x, y] : all) {
    if (y > best) {
      front.x.push_back(x);
      front.y.push_back(y);
      best = y;
    }
  }
  std::reverse(front.x.begin(), front.x.end());
  std::reverse(front.y.begin(), front.y.end());
  spec.series.insert(spec.series.begin(), std::move(front));  // drawn first: the candidates' points stay on top
  return spec;
}

// Issue 44: energy per output token against what a GPU serves, one point
// per capacity probe (each at its offered load), a curve per candidate:
// where a deployment sits between busy (cheap tokens) and idle (dear ones).
ChartSpec energy_chart(const PlanResult& p) {
  ChartSpec spec;
  spec.title = "Energy per output token against throughput per GPU";
  spec.x_label = "output tokens/s per GPU";
  spec.y_label = "joules per output token";
  spec.log_y = true;
  for (const CandidateResult& c : p.candidates) {
    if (!drawn(c) || c.gpus_per_replica <= 0) continue;
    std::vector<const ProbeResult*> probes;
    for (const ProbeResult& pr : c.capacity.probes) {
      if (std::isfinite(pr.joules_per_output_token) && pr.output_throughput > 0) probes.push_back(&pr);
    }
    std::stable_sort(probes.begin(), probes.end(),
                     [](const ProbeResult* a, const ProbeResult* b) { return a->output_throughput < b->output_throughput; });
    ChartSeries series;
    series.name = candidate_label(c.candidate);
    series.emphasized = is_chosen(p, c);
    for (const ProbeResult* pr : probes) {
      series.x.push_back(pr->output_throughput / c.gpus_per_replica);
      series.y.push_back(pr->joules_per_output_token);
    }
    spec.series.push_back(std::move(series));
  }
  return spec;
}

// "2 of 9" capacity probes and cluster checks flagged by simulate's overload
// warning (the queue grew all along); "-" without runs.
std::string overload_cell(const CandidateResult& c) {
  const OverloadCount n = overload_count(c);
  return n.runs == 0 ? "-" : std::to_string(n.overloaded) + " of " + std::to_string(n.runs);
}

std::string table(const PlanResult& p) {
  std::string out =
      "<table>\n<tr><th>rank</th><th>configuration</th><th>capacity (req/s per replica)</th><th>replicas</th>"
      "<th>GPUs</th><th>$/h</th><th>$/M output tokens</th><th>$/M at capacity</th><th>" +
      xml_escape(p.latency_metric) + " (ms)</th><th>overloaded runs</th><th>status</th></tr>\n";
  std::vector<std::size_t> order = p.ranking;
  for (std::size_t i = 0; i < p.candidates.size(); ++i) {
    if (p.candidates[i].status != CandidateStatus::ok) order.push_back(i);
  }
  for (std::size_t r = 0; r < order.size(); ++r) {
    const CandidateResult& c = p.candidates[order[r]];
    const bool ranked = c.status == CandidateStatus::ok;
    const bool chosen = p.chosen >= 0 && order[r] == static_cast<std::size_t>(p.chosen);
    out += std::string(chosen ? "<tr class=\"chosen\">" : "<tr>") + "<td>" + (ranked ? std::to_string(r + 1) : "-") +
           "</td><td>" + xml_escape(candidate_label(c.candidate)) + "</td><td>" +
           (c.capacity.feasible ? fixed(c.capacity.capacity, 3) : "-") + "</td><td>" +
           (c.replicas ? std::to_string(c.replicas) : "-") + "</td><td>" + (c.gpus ? std::to_string(c.gpus) : "-") +
           "</td><td>" + (c.gpus ? fixed(c.cost_per_hour, 2) : "-") + "</td><td>" +
           (c.gpus ? fixed(c.cost_per_m_output_tokens, 3) : "-") + "</td><td>" +
           (c.capacity.feasible ? fixed(c.cost_per_m_output_tokens_at_capacity, 3) : "-") + "</td><td>" +
           fixed(c.latency_ms, 1) + "</td><td>" + overload_cell(c) + "</td><td>" + xml_escape(ranked ? "ok" : std::string(status_name(c.status)) + ": " + c.reason) +
           "</td></tr>\n";
  }
  return out + "</table>\n";
}

}  // namespace

std::string plan_html(const PlanResult& p) {
  std::string out = html_page_head("twinserve plan", 1100,
                                   "td:nth-child(2),th:nth-child(2),td:last-child{text-align:left}tr.chosen{background:#e8f4e8}\n"
                                   "pre{background:#f4f4f4;padding:10px;white-space:pre-wrap;word-break:break-all}\n"
                                   ".answer{font-size:16px}\n") +
                    "<h1>twinserve plan</h1>\n";
  out += "<p>Trace <code>" + xml_escape(p.trace_path) + "</code>: " + std::to_string(p.trace_requests) +
         " requests at " + fixed(p.trace_rate, 3) + " req/s, mean output " + fixed(p.mean_output_tokens, 1) +
         " tokens. SLOs <code>" + xml_escape(p.slos) + "</code>.</p>\n";
  out += "<p class=\"rate\">Planned for <b>" + fixed(p.planned_rate, 3) + " req/s</b>" +
         (p.rate_is_target ? " (<code>--target-rate</code>, " + fixed(p.planned_rate / p.trace_rate, 2) +
                                 "x the trace's rate; the trace's requests replayed at that rate)"
                           : " (the trace's own rate)") +
         ": replicas and costs per token are for this rate.</p>\n";
  if (p.chosen >= 0) {
    const CandidateResult& c = p.candidates[static_cast<std::size_t>(p.chosen)];
    out += "<p class=\"answer\"><b>Answer:</b> " + std::to_string(c.replicas) + " x " +
           xml_escape(candidate_label(c.candidate)) + " = " + std::to_string(c.gpus) + (c.gpus == 1 ? " GPU" : " GPUs") +
           ", $" + fixed(c.cost_per_hour, 2) + "/h, $" + fixed(c.cost_per_m_output_tokens, 3) +
           " per million output tokens at this rate ($" + fixed(c.cost_per_m_output_tokens_at_capacity, 3) +
           " at capacity); " + xml_escape(p.latency_metric) + " " + fixed(c.latency_ms, 1) + " ms.</p>\n";
    out += "<p>On vLLM, " + std::to_string(c.replicas) +
           (c.replicas == 1 ? " replica" : " replicas behind a " + xml_escape(c.candidate.router) + " router") +
           " of:</p>\n<pre>" + xml_escape(p.chosen_vllm_serve) + "</pre>\n";
  } else {
    out += "<p class=\"answer\"><b>No candidate meets the SLOs</b> within the limits given; the table says why each "
           "fell short.</p>\n";
  }
  const std::vector<Slo> slos = parse_slos(p.slos);
  out += "<h2>Latency against load</h2>\n<p>Each candidate's capacity probes (one replica, the trace's requests "
         "at rescaled rates): where a curve crosses the dashed SLO line is its capacity.</p>\n";
  for (std::size_t k = 0; k < slos.size(); ++k) {
    if (slos[k].percentile > 0) out += svg_chart(latency_chart(p, slos[k], k));
  }
  out += "<h2>Throughput per GPU against speed per user</h2>\n<p>Every probe of every candidate; the front is the "
         "best throughput per GPU at each speed a user sees.</p>\n";
  out += svg_chart(pareto_chart(p));
  out += "<h2>Energy per token against throughput per GPU</h2>\n<p>Every capacity probe of every candidate: the "
         "energy the replica drew (its hardware profile's power figures, docs/energy.md) over the output tokens it "
         "served. A candidate whose profile has no power figures has no points.</p>\n";
  out += svg_chart(energy_chart(p));
  out += "<h2>Candidates</h2>\n<p><i>Overloaded runs</i>: the candidate's capacity probes and cluster checks in "
         "which simulate's overload warning held (the queue grew all along, so the latencies measure it); such a run "
         "fails its SLOs. A pruned candidate's status gives the reason, e.g. vLLM's start-up check.</p>\n" +
         table(p);
  out += "<p>Written by <code>twinserve plan</code>; the data is in plan.json beside this page.</p>\n</body>\n</html>\n";
  return out;
}

}  // namespace twin
