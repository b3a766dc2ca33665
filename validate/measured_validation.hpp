#pragma once
// `twinserve validate --measured FILE`: the simulator's prediction against a
// run measured elsewhere (a real vLLM under `vllm bench serve`, `twinserve
// bench` against any server, our own engine). The trace's requests are
// simulated on the deployment the flags describe, each arriving when the
// measured client sent it and generating as many tokens as it measured, and
// the two runs are compared as `validate` compares the engine with a model.
// docs/validate.md ("Against a run measured elsewhere").
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cluster_config.hpp"
#include "traces/trace_reader.hpp"
#include "validate/comparison.hpp"
#include "validate/measured_fit.hpp"
#include "validate/measured_run.hpp"
#include "validate/run_recorder.hpp"

namespace twin {

struct MeasuredValidateOptions {
  std::string measured;  // requests.csv, a vLLM result .json, or /metrics scrapes
  std::string trace;     // the requests the measured client sent, in its order
  TraceReadOptions read;
  std::int64_t max_requests = 0;  // 0: the whole trace
  ClusterConfig cluster;          // the deployment that was measured
  std::filesystem::path out_dir;
  bool overwrite = false;
  // Asked at every turn of the prediction's loop (the command's Ctrl-C):
  // true ends it, predicted/ holds its records so far, marked, and the
  // result's predicted.interrupted is set (no comparison is made).
  std::function<bool()> stop;
};

struct MeasuredValidation {
  std::string measured, trace, cost_model;  // cost_model: calibrated (a profile) or roofline
  std::string model, hardware;
  MeasuredRun run;          // what the file said, as records
  RunRecords measured_records;  // those records summarised (measured/)
  RunRecords predicted;         // the simulation (predicted/)
  std::vector<MetricComparison> metrics;
  std::vector<RequestErrorStats> request_errors;
  // A run of /metrics scrapes (validate/scrape_run.hpp): the histograms'
  // growth over the run against the replay of the trace (mean from their
  // sums, p50 and p90 to their buckets' resolution); `run`,
  // `measured_records`, `metrics` and `request_errors` stay empty.
  std::optional<RunScore> scrape;
  std::shared_ptr<const ScrapeRun> scrape_run;
  std::vector<std::string> warnings;
};

MeasuredValidation run_measured_validation(const MeasuredValidateOptions& options);

nlohmann::ordered_json measured_report_json(const MeasuredValidation& result);
void write_measured_report_markdown(std::ostream& out, const MeasuredValidation& result);
void print_measured_table(std::ostream& out, const MeasuredValidation& result);

}  // namespace twin
