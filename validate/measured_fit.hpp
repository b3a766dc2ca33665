#pragma once
// `twinserve calibrate --measured`: fits a hardware profile's free
// parameters (validate/fit_params.hpp) to runs measured on a user's own
// deployment, so the simulator, replaying each run's requests as they were
// sent, matches the measured per-request TTFT, TPOT and E2E latency.
// NLopt's bounded derivative-free Subplex minimises a soft-L1 loss of the
// relative residuals; intervals come from the Gauss-Newton curvature at
// the optimum. docs/calibrate.md ("Fitting a deployment").
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/records.hpp"
#include "engine/core/request.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "sim/cluster_config.hpp"
#include "traces/trace_reader.hpp"
#include "validate/fit_params.hpp"
#include "validate/scrape_run.hpp"

namespace twin {

// One measured run, ready to replay.
struct FitRun {
  std::string path;    // the RUN as given
  std::string format;  // "vllm" or "requests.csv"
  std::string trace;   // the trace it played; empty: requests from the file's own lengths
  std::string model_id;  // the file's model_id (vLLM), empty when it names none
  std::vector<Request> requests;        // measured send times and output lengths
  std::vector<RequestRecord> measured;  // the same order
  // Per request: 1 when its residuals count in the fit (all by default;
  // the first half of the time span with a time split). A scrape run: per
  // interval between its scrapes.
  std::vector<char> scored;
  // A run of /metrics scrapes (format "prometheus"): what it measured is
  // the growth of the server's histograms per interval; `measured` is empty
  // and `requests` are the trace's, at its timestamps.
  std::shared_ptr<const ScrapeRun> scrape;
  std::string model_key = "key \"model_id\"";  // where model_id was read, for errors
  std::vector<std::string> warnings;  // what the run's reader noticed
};

// Reads a RUN: a vLLM `bench serve --save-result --save-detailed` JSON, our
// requests.csv, or a `twinserve bench` output folder (its vllm_result.json,
// else its requests.csv). `trace` may be empty: the requests are then the
// file's own lengths and send times (no prefix sharing is known). Errors
// name the file and the key.
FitRun load_fit_run(const std::string& path, const std::string& trace, const TraceReadOptions& read,
                    std::int64_t max_requests);

// A RUN as `--measured` takes it: a path, or `RESULTS=TRACE` (the results
// and the trace that run played, for runs of different traces). A path
// that exists is taken whole, '=' and all.
std::pair<std::string, std::string> split_run_trace(const std::string& run);

// Refuses runs that contradict the deployment or each other: a model_id of
// another model than `model`, two runs naming different models, prompts
// the trace does not have (another tokenizer), a request longer than the
// deployment's max_model_len. UsageError naming the run and the key.
void check_fit_runs(const std::vector<FitRun>& runs, const ClusterConfig& cluster);

// Scores only the requests sent in the first half of the run's time span
// (`first_half`) or only the rest.
void score_half(FitRun& run, bool first_half);

struct FitOptions {
  FitProfile base;  // a roofline hardware profile, or with a calibrated profile
  ClusterConfig cluster;  // the deployment; each group's hardware is replaced by the candidate
  std::vector<std::string> params;  // empty: every parameter the runs' layout can identify
  int max_evals = 300;  // simulations per fit, the curvature's not counted
  // A parameter whose 95% interval is wider than +-this (relative) is not
  // identified: reported, kept at the base's value, and the rest refitted.
  double max_rel_interval = 0.25;
  std::filesystem::path scratch;  // a folder for the candidate profile
  // Asked before each simulation of the search (calibrate --measured's
  // Ctrl-C): true ends it; the fit is then the best point so far, without
  // intervals or refit, and FitOutcome::interrupted says so.
  std::function<bool()> stop;
};

struct ParamEstimate {
  std::string name, what, unit;
  double base = 0, value = 0, lower = 0, upper = 0;
  double ci_low = 0, ci_high = 0;  // 95%; equal to value when not identified
  bool fitted = false;      // was free in the final fit
  bool identified = false;  // fitted and its interval within max_rel_interval
  std::string note;         // why not identified
};

struct FitOutcome {
  std::vector<ParamEstimate> params;  // those that fit the base's kind
  FitProfile fitted;
  double base_loss = 0, loss = 0;
  std::int64_t residuals = 0;  // per-request metric residuals in the loss
  int evaluations = 0;
  std::vector<std::string> warnings;
  bool interrupted = false;  // FitOptions::stop ended the search
};

// UsageError for an unknown parameter, one of the other kind of base
// (a roofline parameter on a calibrated profile, or the reverse) or one the
// layout cannot identify;
// Error when the runs identify none of them.
FitOutcome fit_runs(const std::vector<FitRun>& runs, const FitOptions& options);

// A metric's statistics over one run's requests (finished in both the
// measurement and the prediction), ms.
struct MetricStats {
  double mean = 0, p50 = 0, p90 = 0;
};
struct MetricScore {
  std::string metric;  // ttft, tpot, e2e
  std::int64_t count = 0;
  MetricStats measured, predicted;
  double mean_abs_request_error_pct = 0;  // per request |pred - meas| / meas
};
struct RunScore {
  std::string run;
  std::string subset;  // "all", "first half", "second half"
  std::vector<MetricScore> metrics;
  // A scrape run: the prompt tokens its prefix cache hit, % of those
  // queried, measured (the counters) and in the replay; NaN when unknown.
  double measured_prefix_hit_pct = std::numeric_limits<double>::quiet_NaN();
  double predicted_prefix_hit_pct = std::numeric_limits<double>::quiet_NaN();
};

// Simulates `run` on `hw` and scores the requests `scored` marks (or the
// others, with `complement`).
RunScore score_run(const FitRun& run, const FitProfile& profile, const FitOptions& options, bool complement = false);

}  // namespace twin
