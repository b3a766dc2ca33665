#include "validate/scrape_validation.hpp"

#include <cmath>
#include <cstdio>
#include <ostream>
#include <tuple>
#include <unordered_map>

#include "validate/comparison.hpp"
#include "validate/fit_scrape.hpp"
#include "validate/report_numbers.hpp"
#include "validate/sim_serve.hpp"

namespace twin {
namespace {

using Json = nlohmann::ordered_json;

std::string f(double v, int decimals = 1) { return fixed_or(v, decimals, "-"); }
std::string pct(double v) { return signed_pct_or(v, "-"); }
Json num(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

const char* tpot_text(const ScrapeRun& s) {
  return s.tpot_basis == "request" ? "per-request TPOT histogram"
         : s.tpot_basis == "token" ? "inter-token latency histogram (token-weighted)"
                                   : "none";
}

}  // namespace

void validate_scrapes(const MeasuredValidateOptions& o, MeasuredValidation& v) {
  FitRun run = load_scrape_fit_run(o.measured, o.trace, o.read, o.max_requests);
  check_fit_runs({run}, o.cluster);
  Json echo;
  echo["trace"] = o.trace;
  echo["measured"] = o.measured;
  v.predicted = simulate_requests(o.cluster, run.requests, o.out_dir / "predicted", o.overwrite, v.cost_model, nullptr, echo);
  std::unordered_map<RequestId, const RequestRecord*> by_id;
  for (const RequestRecord& r : v.predicted.requests) by_id.emplace(r.id, &r);
  std::vector<RequestRecord> predicted(run.requests.size());
  for (std::size_t i = 0; i < run.requests.size(); ++i) {
    const auto it = by_id.find(run.requests[i].id);
    if (it != by_id.end()) predicted[i] = *it->second;
    else predicted[i].outcome = Outcome::rejected;
  }
  v.scrape = score_scrape_run(run, predicted, false);
  v.run.format = run.format;
  v.warnings = run.warnings;
  v.scrape_run = run.scrape;
}

Json scrape_report_json(const MeasuredValidation& v) {
  Json out;
  out["measured"] = v.measured;
  out["format"] = "prometheus";
  out["engine"] = v.scrape_run->engine;
  out["scrapes"] = v.scrape_run->scrapes.size();
  out["trace"] = v.trace;
  out["model"] = v.model;
  out["hardware"] = v.hardware;
  out["cost_model"] = v.cost_model;
  out["measured_finished"] = v.scrape_run->finished();
  out["predicted_completed"] = v.predicted.summary.completed;
  out["tpot_from"] = tpot_text(*v.scrape_run);
  Json metrics = Json::object();
  for (const MetricScore& m : v.scrape->metrics) {
    Json j;
    for (const auto& [stat, a, b] : {std::tuple{"mean", m.measured.mean, m.predicted.mean},
                                     std::tuple{"p50", m.measured.p50, m.predicted.p50},
                                     std::tuple{"p90", m.measured.p90, m.predicted.p90}})
      j[stat] = Json{{"measured", num(a)}, {"predicted", num(b)}, {"error_pct", num(error_pct(a, b))}};
    j["count"] = m.count;
    metrics[m.metric + "_ms"] = j;
  }
  out["metrics"] = metrics;
  out["prefix_cache_hit_pct"] = Json{{"measured", num(v.scrape->measured_prefix_hit_pct)},
                                     {"predicted", num(v.scrape->predicted_prefix_hit_pct)}};
  out["warnings"] = v.warnings;
  return out;
}

void write_scrape_report_markdown(std::ostream& out, const MeasuredValidation& v) {
  out << "# Prediction against /metrics scrapes\n\n"
      << "- measured: `" << v.measured << "` (" << v.scrape_run->engine << ", " << v.scrape_run->scrapes.size()
      << " scrapes), " << f(v.scrape_run->finished(), 0) << " requests finished between the first and the last\n"
      << "- trace: `" << v.trace << "`, replayed at its timestamps\n"
      << "- predicted: " << v.model << " on " << v.hardware << ", " << v.cost_model << " cost model, "
      << v.predicted.summary.completed << " completed\n"
      << "- TPOT from the " << tpot_text(*v.scrape_run) << "; p50 and p90 to the histograms' buckets\n";
  for (const std::string& w : v.warnings) out << "- warning: " << w << "\n";
  out << "\n| metric | stat | measured ms | predicted ms | error |\n|---|---|---:|---:|---:|\n";
  for (const MetricScore& m : v.scrape->metrics) {
    out << "| " << m.metric << " | mean | " << f(m.measured.mean, 2) << " | " << f(m.predicted.mean, 2) << " | "
        << pct(error_pct(m.measured.mean, m.predicted.mean)) << " |\n";
    out << "| " << m.metric << " | p50 | " << f(m.measured.p50, 2) << " | " << f(m.predicted.p50, 2) << " | "
        << pct(error_pct(m.measured.p50, m.predicted.p50)) << " |\n";
    out << "| " << m.metric << " | p90 | " << f(m.measured.p90, 2) << " | " << f(m.predicted.p90, 2) << " | "
        << pct(error_pct(m.measured.p90, m.predicted.p90)) << " |\n";
  }
}

void print_scrape_table(std::ostream& out, const MeasuredValidation& v) {
  out << "Measured " << v.measured << " (/metrics scrapes of " << v.scrape_run->engine << ", "
      << f(v.scrape_run->finished(), 0) << " requests finished) against " << v.model << " on " << v.hardware << " ("
      << v.cost_model << "); the trace replayed at its timestamps\n";
  char line[160];
  std::snprintf(line, sizeof line, "%-10s %-5s %12s %12s %9s\n", "metric", "stat", "measured", "predicted", "error");
  out << line;
  for (const MetricScore& m : v.scrape->metrics) {
    for (const auto& [stat, a, b] : {std::tuple{"mean", m.measured.mean, m.predicted.mean},
                                     std::tuple{"p50", m.measured.p50, m.predicted.p50},
                                     std::tuple{"p90", m.measured.p90, m.predicted.p90}}) {
      std::snprintf(line, sizeof line, "%-10s %-5s %12s %12s %9s\n", (m.metric + "_ms").c_str(), stat, f(a, 2).c_str(),
                    f(b, 2).c_str(), pct(error_pct(a, b)).c_str());
      out << line;
    }
  }
  if (std::isfinite(v.scrape->measured_prefix_hit_pct)) {
    out << "prefix cache hits " << f(v.scrape->measured_prefix_hit_pct) << "% measured, "
        << f(v.scrape->predicted_prefix_hit_pct) << "% predicted, of the prompt tokens\n";
  }
}

}  // namespace twin
