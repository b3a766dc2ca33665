#pragma once
// `twinserve calibrate --measured RUN [RUN...]` as a library call: reads
// the runs, fits the base profile to them (validate/measured_fit.hpp),
// cross-validates (leave one run out; or, with a time split, the second
// half of each run predicted from the first), and makes the fitted profile
// with its `fitted_from` record. docs/calibrate.md ("Fitting a deployment").
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/measured_fit.hpp"

namespace twin {

struct MeasuredCalibrationOptions {
  std::vector<std::string> runs;
  std::vector<std::string> traces;  // none, one for every run, or one per run
  TraceReadOptions read;
  std::int64_t max_requests = 0;
  std::string base_hardware;  // bundled name or file
  // A calibrated profile (`calibrate --model`'s): the fit's base is then the
  // engine's measured op tables, its step model fitted (op_scale, step
  // terms) and a calibrated profile written; the hardware profile only
  // plans the memory. Empty: the roofline base_hardware is fitted.
  std::string base_profile;
  ClusterConfig cluster;      // the deployment (its groups' hardware is the base)
  std::vector<std::string> params;
  int max_evals = 300;
  double max_rel_interval = 0.25;
  bool time_split = false;       // --holdout-split time
  bool cross_validate = true;    // leave one run out, with two runs or more
  std::function<void(const std::string&)> progress;  // a line per phase; may be empty
  // Asked before each simulation of the fit's search (the command's
  // Ctrl-C): true ends it at the best point so far (FitOptions::stop),
  // without held-out checks; the profile's fitted_from says "interrupted".
  std::function<bool()> stop;
};

struct MeasuredCalibration {
  std::vector<FitRun> runs;
  FitOutcome fit;
  // Per run: the fit on the requests it fitted (all; the first half with a
  // time split).
  std::vector<RunScore> in_sample;
  // Per run: predicted by a fit that did not see it: the fit on the other
  // runs (two runs or more), or the run's second half (time split); empty
  // with one run and no split.
  std::vector<RunScore> held_out;
  // The fitted profile with fitted_from: a hardware profile, or a
  // calibrated one when the base was (options.base_profile).
  nlohmann::ordered_json profile;
};

MeasuredCalibration run_measured_calibration(const MeasuredCalibrationOptions& options);

// The fit report: the parameters, then per run measured against fitted
// (mean, p50, p90 of TTFT, TPOT, E2E) and the held-out predictions.
void print_calibration_report(std::ostream& out, const MeasuredCalibration& result);

}  // namespace twin
