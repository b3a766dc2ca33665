#pragma once
// calibrate --measured's replay: a run's requests simulated on a candidate
// profile, and the per-request relative residuals against the measurement
// that the fit's loss and its curvature are made of.
#include <array>
#include <vector>

#include "validate/measured_fit.hpp"

namespace twin {

enum FitMetric { kTtft = 0, kTpot = 1, kE2e = 2 };
inline constexpr const char* kFitMetricNames[3] = {"ttft", "tpot", "e2e"};

// The predicted records of run's requests, in the run's order (a request
// the simulation did not finish keeps outcome != finished).
// A calibrated candidate prices the steps (the group's `profile`), its
// hardware profile plans the memory.
std::vector<RequestRecord> replay_run(const FitRun& run, const FitProfile& profile, const FitOptions& options);

// A metric of a finished record in ms; NaN where it has none (TPOT of a
// one-token output).
double metric_ms(const RequestRecord& r, int metric);

// The residual slots of the runs: per run and metric, the scored requests
// that finished in the measurement, in send order, taken `kFitBin` at a
// time. A slot's residual compares the mean over its requests: a single
// request's TTFT moves by up to a whole step with where its arrival falls
// against the step boundaries, noise that makes a per-request loss jagged
// in the parameters; the mean over a few neighbours keeps the time
// structure and averages that phase out. Fixed once, so every evaluation
// lists the same slots.
inline constexpr std::size_t kFitBin = 20;
struct ResidualSlot {
  std::size_t run = 0;
  std::vector<std::size_t> requests;
  std::vector<double> measured_each;  // ms, per request
  int metric = 0;
  double measured_ms = 0;  // the mean over `requests`
  // A scrape run's slot (validate/fit_scrape.hpp): no requests are listed;
  // the slot is the requests ranked [rank_lo, rank_hi) by when the
  // simulation observed the metric (first token for TTFT, the end for the
  // others), as the server's histogram counted them; `token_weighted`: TPOT
  // as total decode time over total gaps (an inter-token histogram).
  bool ranked = false;
  bool token_weighted = false;
  std::int64_t rank_lo = 0, rank_hi = 0;
};
std::vector<ResidualSlot> residual_slots(const std::vector<FitRun>& runs);

// (predicted - measured) / measured per slot; a request the prediction did
// not finish counts as twice its measured time.
std::vector<double> relative_residuals(const std::vector<ResidualSlot>& slots,
                                       const std::vector<std::vector<RequestRecord>>& predicted);

// The fit's loss: per metric, the mean soft-L1 of its slots' residuals
// (scale 0.1: quadratic within about 10%, linear beyond), summed.
double fit_loss(const std::vector<ResidualSlot>& slots, const std::vector<double>& residuals);

}  // namespace twin
