#include "validate/measured_validation.hpp"

#include <cstdio>
#include <ostream>

#include "base/error.hpp"
#include "metrics/output_dir.hpp"
#include "metrics/summary_json.hpp"
#include "validate/report.hpp"
#include "validate/report_numbers.hpp"
#include "validate/scrape_validation.hpp"
#include "validate/sim_serve.hpp"
#include "validate/trace_requests.hpp"

namespace twin {
namespace {

std::string f(double v, int decimals = 3) { return fixed_or(v, decimals, "-"); }
std::string pct(double v) { return signed_pct_or(v, "-"); }

std::string arrivals_text(const MeasuredRun& run) {
  return run.send_times ? "the measured client's send times" : "the trace's timestamps (the file has no send times)";
}

}  // namespace

MeasuredValidation run_measured_validation(const MeasuredValidateOptions& o) {
  if (o.out_dir.empty()) throw UsageError("validate --measured needs --out DIR");
  const OutputDir out_dir(o.out_dir, o.overwrite, {"report.json", "report.md"});
  if (o.cluster.groups.size() != 1) {
    throw UsageError("validate --measured predicts one replica group; the cluster config has " +
                     std::to_string(o.cluster.groups.size()));
  }
  MeasuredValidation v;
  v.measured = o.measured;
  v.trace = o.trace;
  v.model = o.cluster.groups.front().model;
  v.hardware = o.cluster.groups.front().hardware;
  v.cost_model = o.cluster.groups.front().profile.empty() ? "roofline" : "calibrated";
  if (is_scrape_path(o.measured)) {
    validate_scrapes(o, v);
    return v;
  }
  const std::vector<Request> trace = read_trace_requests(o.trace, o.read, o.max_requests);
  v.run = read_measured_run(o.measured, trace);

  // The measured side in our schema, through the same collector, so both
  // summaries count alike (a client sees no steps: its steps.csv is empty).
  RunRecorder recorder(o.out_dir / "measured", o.overwrite);
  for (const RequestRecord& r : v.run.records) recorder.on_request(r);
  SummaryContext context;
  context.num_replicas = 1;
  context.config["measured"] = o.measured;
  context.config["format"] = v.run.format;
  context.config["trace"] = o.trace;
  v.measured_records = recorder.finish(context);

  nlohmann::ordered_json echo;
  echo["trace"] = o.trace;
  echo["measured"] = o.measured;
  v.predicted = simulate_requests(o.cluster, measured_requests(trace, v.run), o.out_dir / "predicted", o.overwrite,
                                  v.cost_model, nullptr, echo, o.stop);
  if (v.predicted.interrupted) return v;  // part of a prediction compares with nothing
  v.metrics = compare_summaries(v.measured_records.summary, v.predicted.summary);
  v.request_errors = request_errors(v.run.records, v.predicted.requests);
  return v;
}

nlohmann::ordered_json measured_report_json(const MeasuredValidation& v) {
  using Json = nlohmann::ordered_json;
  if (v.scrape) return scrape_report_json(v);
  Json out;
  out["measured"] = v.measured;
  out["format"] = v.run.format;
  out["trace"] = v.trace;
  out["requests"] = v.run.records.size();
  out["model"] = v.model;
  out["hardware"] = v.hardware;
  out["cost_model"] = v.cost_model;
  out["arrivals"] = v.run.send_times ? "send_times" : "trace";
  out["measured_completed"] = v.measured_records.summary.completed;
  out["predicted_completed"] = v.predicted.summary.completed;
  out["itl_gaps_left_out"] = v.run.gaps_left_out;
  out["prompt_mismatches"] = v.run.prompt_mismatches;
  if (!v.run.first_prompt_mismatch.empty()) out["first_prompt_mismatch"] = v.run.first_prompt_mismatch;
  const Json metrics = metric_comparison_json(v.metrics);
  for (auto it = metrics.begin(); it != metrics.end(); ++it) out[it.key()] = *it;
  out["per_request_error_pct"] = request_errors_json(v.request_errors);
  return out;
}

void write_measured_report_markdown(std::ostream& out, const MeasuredValidation& v) {
  if (v.scrape) return write_scrape_report_markdown(out, v);
  out << "# Prediction against a measured run\n\n"
      << "- measured: `" << v.measured << "` (" << v.run.format << "), " << v.measured_records.summary.completed
      << " of " << v.run.records.size() << " requests completed\n"
      << "- trace: `" << v.trace << "`; arrivals: " << arrivals_text(v.run) << "\n"
      << "- predicted: " << v.model << " on " << v.hardware << ", " << v.cost_model << " cost model, "
      << v.predicted.summary.completed << " completed\n";
  if (v.run.gaps_left_out > 0) {
    out << "- " << v.run.gaps_left_out
        << " measured requests streamed several tokens per chunk: their gaps are left out of the measured ITL\n";
  }
  if (v.run.prompt_mismatches > 0) {
    out << "- " << v.run.prompt_mismatches << " requests' measured prompt length differs from the trace's (first: "
        << v.run.first_prompt_mismatch << "); the prediction uses the trace's\n";
  }
  if (!v.run.itl) out << "- the measured file has no inter-token gaps (requests.csv): ITL is not compared\n";
  out << "\n| metric | stat | measured | predicted | error |\n|---|---|---:|---:|---:|\n";
  for (const MetricComparison& m : v.metrics) {
    out << "| " << m.metric << " | " << m.stat << " | " << f(m.measured) << " | " << f(m.predicted) << " | "
        << pct(m.error_pct) << " |\n";
  }
  out << "\nPer request (signed % error of the prediction, requests finished in both):\n\n"
      << "| metric | count | p10 | p50 | p90 | mean abs |\n|---|---:|---:|---:|---:|---:|\n";
  for (const RequestErrorStats& e : v.request_errors) {
    out << "| " << e.metric << " | " << e.count << " | " << pct(e.p10) << " | " << pct(e.p50) << " | " << pct(e.p90)
        << " | " << f(e.mean_abs, 1) << "% |\n";
  }
}

void print_measured_table(std::ostream& out, const MeasuredValidation& v) {
  if (v.scrape) return print_scrape_table(out, v);
  out << "Measured " << v.measured << " (" << v.run.format << ", " << v.measured_records.summary.completed << "/"
      << v.run.records.size() << " completed) against " << v.model << " on " << v.hardware << " (" << v.cost_model
      << "); arrivals: " << arrivals_text(v.run) << "\n";
  char line[160];
  std::snprintf(line, sizeof line, "%-18s %-5s %12s %12s %9s\n", "metric", "stat", "measured", "predicted", "error");
  out << line;
  for (const MetricComparison& m : v.metrics) {
    if (m.stat == "p99") continue;  // report.md has every statistic
    std::snprintf(line, sizeof line, "%-18s %-5s %12s %12s %9s\n", m.metric.c_str(),
                  m.stat == "value" ? "" : m.stat.c_str(), f(m.measured).c_str(), f(m.predicted).c_str(),
                  pct(m.error_pct).c_str());
    out << line;
  }
}

}  // namespace twin
