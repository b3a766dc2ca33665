#include "validate/measured_calibration.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <system_error>

#include "base/error.hpp"
#include "hwprofiles/calibrated_profile.hpp"
#include "hwprofiles/hardware_writer.hpp"
#include "validate/comparison.hpp"
#include "validate/fit_params.hpp"
#include "validate/fit_replay.hpp"
#include "validate/sim_serve.hpp"

namespace twin {
namespace {

using Json = nlohmann::ordered_json;

std::string num(double v, int decimals = 1) {
  if (!std::isfinite(v)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pct(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%+.1f%%", v);
  return buf;
}

// The candidate profiles' folder, removed when the calibration ends.
struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    dir = std::filesystem::temp_directory_path() / ("twinserve-calibrate-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

std::vector<FitRun> load_runs(const MeasuredCalibrationOptions& o) {
  if (o.runs.empty()) throw UsageError("--measured needs at least one run");
  if (o.traces.size() > 1 && o.traces.size() != o.runs.size()) {
    throw UsageError("--trace: give one trace for every run or one per run (" + std::to_string(o.runs.size()) +
                     " runs, " + std::to_string(o.traces.size()) + " traces)");
  }
  std::vector<FitRun> runs;
  for (std::size_t i = 0; i < o.runs.size(); ++i) {
    auto [path, trace] = split_run_trace(o.runs[i]);
    if (trace.empty() && !o.traces.empty()) trace = o.traces[o.traces.size() == 1 ? 0 : i];
    runs.push_back(load_fit_run(path, trace, o.read, o.max_requests));
  }
  check_fit_runs(runs, o.cluster);
  return runs;
}

FitOptions fit_options(const MeasuredCalibrationOptions& o, const FitProfile& base, const std::filesystem::path& scratch) {
  FitOptions f;
  f.base = base;
  f.cluster = o.cluster;
  f.params = o.params;
  f.max_evals = o.max_evals;
  f.max_rel_interval = o.max_rel_interval;
  f.scratch = scratch;
  f.stop = o.stop;
  return f;
}

Json stats_json(const MetricStats& s) { return Json{{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}}; }

Json null_or(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

Json score_json(const RunScore& s) {
  Json metrics = Json::object();
  for (const MetricScore& m : s.metrics) {
    metrics[m.metric] = Json{{"requests", m.count},
                             {"measured_ms", stats_json(m.measured)},
                             {"fitted_ms", stats_json(m.predicted)},
                             {"error_pct",
                              {{"mean", null_or(error_pct(m.measured.mean, m.predicted.mean))},
                               {"p50", null_or(error_pct(m.measured.p50, m.predicted.p50))},
                               {"p90", null_or(error_pct(m.measured.p90, m.predicted.p90))}}},
                             {"mean_abs_request_error_pct", m.mean_abs_request_error_pct}};
  }
  Json j{{"run", s.run}, {"requests", s.subset}, {"metrics", metrics}};
  if (std::isfinite(s.measured_prefix_hit_pct)) {
    j["prefix_cache_hit_pct"] = Json{{"measured", s.measured_prefix_hit_pct}, {"fitted", null_or(s.predicted_prefix_hit_pct)}};
  }
  return j;
}

Json param_json(const ParamEstimate& e) {
  Json j{{"name", e.name}, {"what", e.what}, {"unit", e.unit}, {"base", e.base}, {"value", e.value},
         {"bounds", Json::array({e.lower, e.upper})}, {"fitted", e.fitted}, {"identified", e.identified}};
  j["ci95"] = e.fitted && e.identified ? Json::array({e.ci_low, e.ci_high}) : Json(nullptr);
  if (!e.note.empty()) j["note"] = e.note;
  return j;
}

// The calibrated base the fit started from: its file and where and when
// calibrate timed it.
Json base_profile_json(const FitProfile& base) {
  const ProfileMetadata& m = base.calibrated->metadata;
  const StepOverhead& s = base.calibrated->overhead;
  return Json{{"path", base.calibrated_path}, {"model", m.model},         {"device", m.device},
              {"hostname", m.hostname},     {"date", m.date},           {"git_commit", m.git_commit},
              {"op_scale", s.op_scale},     {"base_ns", s.base_ns},     {"per_seq_ns", s.per_seq_ns}};
}

Json fitted_from_json(const MeasuredCalibrationOptions& o, const MeasuredCalibration& r, const FitProfile& base) {
  Json j;
  j["tool"] = std::string("twinserve calibrate --measured") + (base.calibrated ? " --profile" : "");
  j["base_hardware"] = base.hw.name;
  if (base.calibrated) j["base_profile"] = base_profile_json(base);
  Json runs = Json::array();
  for (const FitRun& run : r.runs) {
    std::int64_t scored = 0;
    for (const char s : run.scored) scored += s ? 1 : 0;
    Json entry{{"path", run.path}, {"format", run.format}, {"trace", run.trace.empty() ? Json(nullptr) : Json(run.trace)},
               {"model_id", run.model_id.empty() ? Json(nullptr) : Json(run.model_id)},
               {"requests", run.requests.size()}};
    if (run.scrape) {
      entry["scrape"] = Json{{"engine", run.scrape->engine}, {"scrapes", run.scrape->scrapes.size()},
                             {"intervals", run.scrape->intervals()}, {"fitted_intervals", scored},
                             {"finished_requests", run.scrape->finished()},
                             {"tpot_from", run.scrape->tpot_basis == "request" ? "per-request TPOT histogram"
                                           : run.scrape->tpot_basis == "token" ? "inter-token latency histogram (token-weighted)"
                                                                               : "none"}};
    } else {
      entry["fitted_requests"] = scored;
    }
    runs.push_back(entry);
  }
  j["runs"] = runs;
  ClusterConfig settings = o.cluster;
  for (ReplicaGroupConfig& g : settings.groups) {
    g.hardware = base.hw.name;
    g.profile = base.calibrated_path;
  }
  j["settings"] = cluster_config_json(settings);
  j["holdout_split"] = o.time_split ? "time" : "none";
  j["method"] = "NLopt GN_DIRECT_L over two thirds of the budget, then LN_SBPLX (bounded Subplex) restarted from the best point; at most " + std::to_string(o.max_evals) +
                " simulations per fit, from the base's values; loss: per metric (TTFT, TPOT, E2E) the mean soft-L1 "
                "(scale 0.1) of relative residuals of the mean over consecutive requests (by send time), summed";
  j["intervals"] = "95%, Gauss-Newton curvature of the relative residuals at the optimum (central differences, iid "
                   "errors assumed: optimistic where queued requests' errors are correlated)";
  j["loss"] = Json{{"base", r.fit.base_loss}, {"fitted", r.fit.loss}};
  j["residuals"] = r.fit.residuals;
  j["residual_bin_requests"] = kFitBin;
  j["evaluations"] = r.fit.evaluations;
  if (r.fit.interrupted) j["interrupted"] = true;  // the best point when a Ctrl-C came
  Json params = Json::array();
  for (const ParamEstimate& e : r.fit.params) params.push_back(param_json(e));
  j["parameters"] = params;
  j["warnings"] = r.fit.warnings;
  Json in = Json::array(), out = Json::array();
  for (const RunScore& s : r.in_sample) in.push_back(score_json(s));
  for (const RunScore& s : r.held_out) out.push_back(score_json(s));
  j["in_sample"] = in;
  j["held_out"] = out;
  return j;
}

void progress(const MeasuredCalibrationOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

// The fit's base: the hardware profile, and the calibrated profile when
// one is given, checked against the deployment (model, dtypes, layout) now,
// with errors naming the user's file, not a candidate's.
FitProfile fit_base(const MeasuredCalibrationOptions& o) {
  FitProfile base = resolve_hardware(o.base_hardware);
  if (o.base_profile.empty()) return base;
  base.calibrated = load_calibrated_profile(o.base_profile);
  base.calibrated_path = o.base_profile;
  ClusterConfig check = o.cluster;
  if (check.groups.empty()) check.groups.emplace_back();
  for (ReplicaGroupConfig& g : check.groups) g.profile = o.base_profile;
  (void)cost_model_of(check);
  return base;
}

}  // namespace

MeasuredCalibration run_measured_calibration(const MeasuredCalibrationOptions& o) {
  const Scratch scratch;
  const FitProfile base = fit_base(o);
  const FitOptions fo = fit_options(o, base, scratch.dir);
  MeasuredCalibration r;
  r.runs = load_runs(o);
  if (o.time_split)
    for (FitRun& run : r.runs) score_half(run, true);
  progress(o, "fitting on " + std::to_string(r.runs.size()) + " run(s)" + (o.time_split ? ", first halves" : ""));
  r.fit = fit_runs(r.runs, fo);
  for (const FitRun& run : r.runs) r.fit.warnings.insert(r.fit.warnings.end(), run.warnings.begin(), run.warnings.end());
  for (const FitRun& run : r.runs) {
    r.in_sample.push_back(score_run(run, r.fit.fitted, fo));
    r.in_sample.back().subset = o.time_split ? "first half" : "all";
    if (o.time_split && !r.fit.interrupted) {
      r.held_out.push_back(score_run(run, r.fit.fitted, fo, true));
      r.held_out.back().subset = "second half";
    }
  }
  for (const RunScore& s : r.in_sample) {
    if (std::abs(s.measured_prefix_hit_pct - s.predicted_prefix_hit_pct) > 5) {
      r.fit.warnings.push_back(s.run + ": the server's prefix cache hit " + num(s.measured_prefix_hit_pct) +
                               "% of the prompt tokens, the replay " + num(s.predicted_prefix_hit_pct) +
                               "%: prompts cached before the run (an earlier run's, with the same prompts?) or "
                               "sharing the trace does not say; the fit is off by what those hits saved");
    }
  }
  if (!o.time_split && o.cross_validate && r.runs.size() >= 2 && !r.fit.interrupted) {
    for (std::size_t k = 0; k < r.runs.size(); ++k) {
      progress(o, "cross-validation: fitting without " + r.runs[k].path);
      std::vector<FitRun> others;
      for (std::size_t i = 0; i < r.runs.size(); ++i)
        if (i != k) others.push_back(r.runs[i]);
      // A fit on fewer runs may identify nothing the fit on all did: that
      // run then has no held-out prediction, and a warning says why.
      try {
        const FitOutcome cv = fit_runs(others, fo);
        r.held_out.push_back(score_run(r.runs[k], cv.fitted, fo));
        r.held_out.back().subset = "left out";
      } catch (const UsageError&) {
        throw;
      } catch (const Error& e) {
        RunScore none;
        none.run = r.runs[k].path;
        none.subset = "left out: no prediction, the fit on the other runs failed";
        r.held_out.push_back(none);
        r.fit.warnings.push_back("cross-validation: the fit without " + r.runs[k].path + " failed (" + e.what() + ")");
      }
    }
  }
  if (r.fit.fitted.calibrated) {
    r.profile = calibrated_profile_json(*r.fit.fitted.calibrated);
  } else {
    HardwareDesc fitted = r.fit.fitted.hw;
    fitted.name = base.hw.name + "-fitted";
    r.profile = hardware_json(fitted);
  }
  r.profile["fitted_from"] = fitted_from_json(o, r, base);
  return r;
}

namespace {

void print_score(std::ostream& out, const RunScore& s, const char* label) {
  out << "  " << label << " (" << s.subset << "):\n";
  char line[200];
  for (const MetricScore& m : s.metrics) {
    std::snprintf(line, sizeof line,
                  "    %-4s n=%-5lld mean %10s / %10s ms (%8s)  p50 %10s / %10s (%8s)  p90 %10s / %10s (%8s)\n",
                  m.metric.c_str(), static_cast<long long>(m.count), num(m.measured.mean).c_str(),
                  num(m.predicted.mean).c_str(), pct(error_pct(m.measured.mean, m.predicted.mean)).c_str(),
                  num(m.measured.p50).c_str(), num(m.predicted.p50).c_str(),
                  pct(error_pct(m.measured.p50, m.predicted.p50)).c_str(), num(m.measured.p90).c_str(),
                  num(m.predicted.p90).c_str(), pct(error_pct(m.measured.p90, m.predicted.p90)).c_str());
    out << line;
  }
  if (std::isfinite(s.measured_prefix_hit_pct)) {
    out << "    prefix cache hits " << num(s.measured_prefix_hit_pct) << "% / " << num(s.predicted_prefix_hit_pct)
        << "% of the prompt tokens\n";
  }
}

}  // namespace

void print_calibration_report(std::ostream& out, const MeasuredCalibration& r) {
  out << "Fit: loss " << num(r.fit.base_loss, 5) << " (base) -> " << num(r.fit.loss, 5) << " over "
      << r.fit.residuals << " residuals (means of up to " << kFitBin << " requests"
      << (std::any_of(r.runs.begin(), r.runs.end(), [](const FitRun& run) { return run.scrape != nullptr; })
              ? ", or over an interval between scrapes"
              : "")
      << "), " << r.fit.evaluations << " simulations\n";
  char line[240];
  for (const ParamEstimate& e : r.fit.params) {
    if (e.fitted && e.identified) {
      std::snprintf(line, sizeof line, "  %-25s %10.4g %-2s (base %.4g; 95%% %.4g to %.4g)%s%s\n", e.name.c_str(),
                    e.value, e.unit.c_str(), e.base, e.ci_low, e.ci_high, e.note.empty() ? "" : "; ", e.note.c_str());
    } else {
      std::snprintf(line, sizeof line, "  %-25s %10.4g %-2s not identified: %s\n", e.name.c_str(), e.value,
                    e.unit.c_str(), e.note.c_str());
    }
    out << line;
  }
  out << "Per run, measured / fitted (error):\n";
  for (std::size_t k = 0; k < r.runs.size(); ++k) {
    out << "run " << r.runs[k].path << "\n";
    print_score(out, r.in_sample[k], "in sample");
    if (k < r.held_out.size()) print_score(out, r.held_out[k], "held out, predicted");
  }
}

}  // namespace twin
