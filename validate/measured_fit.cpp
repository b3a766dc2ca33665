#include "validate/measured_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <nlopt.hpp>

#include "base/error.hpp"
#include "metrics/percentile.hpp"
#include "validate/fit_params.hpp"
#include "validate/fit_scrape.hpp"
#include "validate/fit_replay.hpp"

namespace twin {
namespace {

constexpr double kZ95 = 1.959964;

// A parameter's optimisation coordinate: log(value) for a scale, ms for a time.
double to_coord(const FitParam& p, double v) { return p.log_space ? std::log(v) : v / 1000.0; }
double from_coord(const FitParam& p, double y) { return p.log_space ? std::exp(y) : y * 1000.0; }

// The fit's problem: the runs, the slots and the free parameters; each
// evaluation simulates every run on base + the free values.
struct Problem {
  Problem(const std::vector<FitRun>& r, const FitOptions& o, std::vector<ResidualSlot> s, std::vector<const FitParam*> f)
      : runs(r), options(o), slots(std::move(s)), free(std::move(f)) {}
  const std::vector<FitRun>& runs;
  const FitOptions& options;
  std::vector<ResidualSlot> slots;
  std::vector<const FitParam*> free;
  int evaluations = 0;
  double best_loss = std::numeric_limits<double>::infinity();
  std::vector<double> best;
  bool stopped = false;  // options.stop ended the search: best is the best point so far

  FitProfile profile(const std::vector<double>& coords) const {
    std::vector<double> values;
    for (std::size_t i = 0; i < free.size(); ++i) values.push_back(from_coord(*free[i], coords[i]));
    return apply_fit_params(options.base, free, values);
  }
  std::vector<double> residuals(const std::vector<double>& coords) {
    const FitProfile hw = profile(coords);
    std::vector<std::vector<RequestRecord>> predicted;
    for (const FitRun& run : runs) predicted.push_back(replay_run(run, hw, options));
    ++evaluations;
    return relative_residuals(slots, predicted);
  }
  double loss(const std::vector<double>& coords) {
    const double l = fit_loss(slots, residuals(coords));
    if (l < best_loss) {
      best_loss = l;
      best = coords;
    }
    return l;
  }
};

double objective(const std::vector<double>& x, std::vector<double>& /*grad*/, void* data) {
  auto* pr = static_cast<Problem*>(data);
  if (pr->stopped || (pr->options.stop && pr->options.stop())) {
    pr->stopped = true;
    throw nlopt::forced_stop();  // NLopt stops gracefully, optimize rethrows it
  }
  return pr->loss(x);
}

// Bounded Subplex (NLopt LN_SBPLX) from the base's values, restarted from
// the best point while the budget lasts and a pass still improves (a
// simplex method can stall on the simulator's discrete decisions);
// deterministic: no random start, a fixed budget. The best point seen is
// kept whatever NLopt's stop reason.
void minimise(Problem& pr) {
  const std::size_t n = pr.free.size();
  std::vector<double> x(n), lo(n), hi(n), step(n);
  for (std::size_t i = 0; i < n; ++i) {
    const FitParam& p = *pr.free[i];
    lo[i] = to_coord(p, std::max(p.lower(pr.options.base), p.log_space ? 1e-6 : 0.0));
    hi[i] = to_coord(p, p.upper(pr.options.base));
    x[i] = std::clamp(to_coord(p, p.identity(pr.options.base)), lo[i], hi[i]);
    // A third in a scale, half a millisecond (or half the value) in a time.
    step[i] = p.log_space ? 0.3 : std::max(0.5, 0.5 * x[i]);
  }
  nlopt::srand(1);
  const int budget_end = pr.evaluations + pr.options.max_evals;
  // First a deterministic global pass (DIRECT-L) over two thirds of the
  // budget: memory efficiency and host overhead trade against each other
  // along a long valley, jagged at the scale of the simulator's discrete
  // decisions, in which a simplex started at the base stalls.
  if (n > 1) {
    nlopt::opt global(nlopt::GN_DIRECT_L, static_cast<unsigned>(n));
    global.set_lower_bounds(lo);
    global.set_upper_bounds(hi);
    global.set_min_objective(objective, &pr);
    global.set_maxeval(pr.options.max_evals * 2 / 3);
    std::vector<double> g = x;
    double f = 0;
    try {
      global.optimize(g, f);
    } catch (const nlopt::roundoff_limited&) {
    } catch (const nlopt::forced_stop&) {
    }
  }
  double previous = std::numeric_limits<double>::infinity();
  for (int pass = 0; pass < 4 && !pr.stopped && budget_end - pr.evaluations >= 2 * static_cast<int>(n) + 2; ++pass) {
    nlopt::opt opt(nlopt::LN_SBPLX, static_cast<unsigned>(n));
    opt.set_lower_bounds(lo);
    opt.set_upper_bounds(hi);
    opt.set_initial_step(step);
    opt.set_min_objective(objective, &pr);
    opt.set_maxeval(budget_end - pr.evaluations);
    opt.set_xtol_abs(1e-4);
    opt.set_ftol_rel(1e-7);
    double f = 0;
    if (!pr.best.empty()) x = pr.best;
    try {
      opt.optimize(x, f);
    } catch (const nlopt::roundoff_limited&) {
    } catch (const nlopt::forced_stop&) {
    }
    if (!(pr.best_loss < previous * (1 - 1e-6))) break;
    previous = pr.best_loss;
    for (double& s : step) s *= 0.5;
  }
  if (pr.best.empty()) pr.best = x;
}

// Solves a small symmetric positive system's inverse (Gauss-Jordan with
// pivoting); false when singular.
bool invert(std::vector<std::vector<double>> a, std::vector<std::vector<double>>& inv) {
  const std::size_t n = a.size();
  inv.assign(n, std::vector<double>(n, 0.0));
  for (std::size_t i = 0; i < n; ++i) inv[i][i] = 1;
  double scale = 0;
  for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(a[i][i]));
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t piv = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    if (!(std::abs(a[piv][c]) > 1e-12 * scale)) return false;
    std::swap(a[c], a[piv]);
    std::swap(inv[c], inv[piv]);
    const double d = a[c][c];
    for (std::size_t k = 0; k < n; ++k) {
      a[c][k] /= d;
      inv[c][k] /= d;
    }
    for (std::size_t r = 0; r < n; ++r) {
      if (r == c || a[r][c] == 0) continue;
      const double m = a[r][c];
      for (std::size_t k = 0; k < n; ++k) {
        a[r][k] -= m * a[c][k];
        inv[r][k] -= m * inv[c][k];
      }
    }
  }
  return true;
}

// The residuals' Jacobian in the coordinates, by central differences
// (one-sided at a bound): 5% in a scale, 10% (at least 20 us) in a time,
// steps wide enough to step over the simulator's discrete decisions.
std::vector<std::vector<double>> jacobian(Problem& pr, const std::vector<double>& at) {
  std::vector<std::vector<double>> cols;
  for (std::size_t i = 0; i < pr.free.size(); ++i) {
    const FitParam& p = *pr.free[i];
    const double h = p.log_space ? 0.05 : std::max(0.02, 0.1 * at[i]);
    const double lo = to_coord(p, std::max(p.lower(pr.options.base), p.log_space ? 1e-6 : 0.0));
    const double hi = to_coord(p, p.upper(pr.options.base));
    std::vector<double> up = at, down = at;
    up[i] = std::min(hi, at[i] + h);
    down[i] = std::max(lo, at[i] - h);
    const std::vector<double> a = pr.residuals(up), b = pr.residuals(down);
    std::vector<double> col(a.size());
    for (std::size_t k = 0; k < a.size(); ++k) col[k] = (a[k] - b[k]) / (up[i] - down[i]);
    cols.push_back(std::move(col));
  }
  return cols;
}

struct Curvature {
  std::vector<double> sd;  // per free parameter, in its coordinate; NaN: not determined
  std::vector<std::string> notes;
};

// Gauss-Newton: cov = s^2 (J'J)^-1 over the relative residuals, s^2 their
// mean square (n - p degrees of freedom). Errors of queued requests are
// correlated, so these intervals are optimistic (docs/calibrate.md).
Curvature curvature(Problem& pr, const std::vector<double>& at) {
  const std::size_t p = pr.free.size();
  Curvature c{std::vector<double>(p, std::numeric_limits<double>::quiet_NaN()), std::vector<std::string>(p)};
  const std::vector<double> z = pr.residuals(at);
  const auto cols = jacobian(pr, at);
  const std::size_t n = z.size();
  if (n <= p) {
    for (auto& note : c.notes) note = "too few requests: " + std::to_string(n) + " residuals for " + std::to_string(p) + " parameters";
    return c;
  }
  double sse = 0;
  for (const double v : z) sse += v * v;
  const double s2 = sse / static_cast<double>(n - p);
  std::vector<std::size_t> live;  // parameters the runs respond to
  for (std::size_t i = 0; i < p; ++i) {
    double norm = 0;
    for (const double v : cols[i]) norm += v * v;
    if (norm > 1e-10 * static_cast<double>(n)) live.push_back(i);
    else c.notes[i] = "the runs do not respond to it";
  }
  std::vector<std::vector<double>> jtj(live.size(), std::vector<double>(live.size(), 0.0)), inv;
  for (std::size_t a = 0; a < live.size(); ++a)
    for (std::size_t b = 0; b < live.size(); ++b)
      for (std::size_t k = 0; k < n; ++k) jtj[a][b] += cols[live[a]][k] * cols[live[b]][k];
  if (!invert(jtj, inv)) {
    for (const std::size_t i : live) c.notes[i] = "confounded with another parameter (singular curvature)";
    return c;
  }
  for (std::size_t a = 0; a < live.size(); ++a) c.sd[live[a]] = std::sqrt(std::max(0.0, s2 * inv[a][a]));
  return c;
}

}  // namespace

namespace {

// TP's all-reduces, or EP's all-to-alls (--ep, or vLLM's experts over its
// data-parallel ranks).
bool has_collectives(const ClusterConfig& c) {
  return std::any_of(c.groups.begin(), c.groups.end(), [](const ReplicaGroupConfig& g) {
    return g.tp > 1 || g.ep > 1 || (g.enable_expert_parallel && g.dp > 1);
  });
}

std::vector<const FitParam*> chosen_params(const FitOptions& o) {
  const bool collectives = has_collectives(o.cluster);
  std::vector<const FitParam*> out;
  if (o.params.empty()) return default_fit_params(o.base, collectives);
  for (const std::string& name : o.params) {
    const FitParam& p = fit_param(name);
    check_fit_param_base(p, o.base);
    if (p.needs_collectives && !collectives) {
      throw UsageError("fit parameter " + name + " needs runs with collectives (--tp > 1, or experts parallel over ranks); these runs have none");
    }
    if (std::find(out.begin(), out.end(), &p) == out.end()) out.push_back(&p);
  }
  return out;
}

// The 95% interval's half-width relative to the value.
double relative_half_width(const FitParam& p, double coord, double sd) {
  if (p.log_space) return std::exp(kZ95 * sd) - 1;
  return kZ95 * sd * 1000.0 / std::max(from_coord(p, coord), 100.0);
}

struct Pass {
  std::vector<double> coords;
  Curvature curve;
  double loss = 0;
};

Pass fit_pass(Problem& pr) {
  minimise(pr);
  Pass pass{pr.best, {}, pr.best_loss};
  if (pr.stopped) {  // no simulation after a stop: no curvature, no interval
    const std::size_t p = pr.free.size();
    pass.curve = {std::vector<double>(p, std::numeric_limits<double>::quiet_NaN()),
                  std::vector<std::string>(p, "the fit was interrupted: the best point so far, no interval")};
    return pass;
  }
  pass.curve = curvature(pr, pass.coords);
  for (std::size_t i = 0; i < pr.free.size(); ++i) {
    const double sd = pass.curve.sd[i];
    if (std::isfinite(sd) && pass.curve.notes[i].empty() &&
        relative_half_width(*pr.free[i], pass.coords[i], sd) > pr.options.max_rel_interval) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "95%% interval +-%.0f%% (more than +-%.0f%%)",
                    100 * relative_half_width(*pr.free[i], pass.coords[i], sd), 100 * pr.options.max_rel_interval);
      pass.curve.notes[i] = buf;
    }
    if (!std::isfinite(sd) && pass.curve.notes[i].empty()) pass.curve.notes[i] = "not determined";
  }
  return pass;
}

ParamEstimate estimate_of(const FitParam& p, const FitProfile& base) {
  ParamEstimate e;
  e.name = p.name;
  e.what = p.what;
  e.unit = p.unit;
  e.base = e.value = e.ci_low = e.ci_high = p.identity(base);
  e.lower = p.lower(base);
  e.upper = p.upper(base);
  return e;
}

}  // namespace

FitOutcome fit_runs(const std::vector<FitRun>& runs, const FitOptions& o) {
  if (runs.empty()) throw UsageError("calibrate --measured needs at least one run");
  // NLopt reads a budget of 0 as none: a search of fewer than 4 would run
  // its global pass unbounded.
  if (o.max_evals < 4) throw UsageError("calibrate --measured: --max-evals must be at least 4");
  const std::vector<const FitParam*> wanted = chosen_params(o);
  FitOutcome out;
  Problem pr{runs, o, residual_slots(runs), wanted};
  if (pr.slots.empty()) throw Error("no measured request to fit: none of the scored requests finished");
  std::vector<double> identity;
  for (const FitParam* p : wanted) identity.push_back(to_coord(*p, p->identity(o.base)));
  out.base_loss = pr.loss(identity);
  Pass pass = fit_pass(pr);
  std::vector<const FitParam*> kept;
  for (std::size_t i = 0; i < wanted.size(); ++i)
    if (pass.curve.notes[i].empty() || pr.stopped) kept.push_back(wanted[i]);  // stopped: no refit
  std::vector<std::string> dropped_notes = pass.curve.notes;
  out.interrupted = pr.stopped;
  if (out.interrupted) {
    out.warnings.push_back("the fit was interrupted after " + std::to_string(pr.evaluations) +
                           " simulations: its parameters are the best point so far, without intervals");
  }
  if (kept.empty()) {
    std::string why;
    for (std::size_t i = 0; i < wanted.size(); ++i) why += std::string("; ") + wanted[i]->name + ": " + dropped_notes[i];
    throw Error("the runs identify none of the fit parameters (" + std::to_string(pr.slots.size()) +
                " residuals)" + why + "; give more requests, more varied loads, or fewer --fit-params");
  }
  // Those not identified are held at the base's values and the rest refitted.
  Problem refit{runs, o, pr.slots, kept};
  refit.evaluations = pr.evaluations;
  Problem* fin = &pr;
  if (kept.size() < wanted.size()) {
    pass = fit_pass(refit);
    fin = &refit;
  }
  for (const FitParam* param : fit_params_for(o.base)) {
    const FitParam& p = *param;
    ParamEstimate e = estimate_of(p, o.base);
    const auto w = std::find(wanted.begin(), wanted.end(), &p);
    const auto k = std::find(fin->free.begin(), fin->free.end(), &p);
    if (w == wanted.end()) {
      e.note = p.needs_collectives && !has_collectives(o.cluster) ? "no collectives in the runs (no TP or EP)" : "not asked for";
    } else if (k == fin->free.end()) {
      e.note = dropped_notes[static_cast<std::size_t>(w - wanted.begin())];
      out.warnings.push_back(std::string("parameter ") + p.name + " not identified by these runs (" + e.note +
                             "); kept at the base's value");
    } else {
      const std::size_t i = static_cast<std::size_t>(k - fin->free.begin());
      const double sd = pass.curve.sd[i];
      e.fitted = true;
      e.value = from_coord(p, pass.coords[i]);
      e.identified = pass.curve.notes[i].empty();
      e.note = pass.curve.notes[i];
      e.ci_low = std::isfinite(sd) ? std::max(e.lower, from_coord(p, pass.coords[i] - kZ95 * sd)) : e.value;
      e.ci_high = std::isfinite(sd) ? std::min(e.upper, from_coord(p, pass.coords[i] + kZ95 * sd)) : e.value;
      if (!e.identified && !out.interrupted)
        out.warnings.push_back(std::string("parameter ") + p.name + " poorly identified after the refit (" + e.note + ")");
      // At a bound the data wanted more than the bound allows (an
      // efficiency of 1, a scale of 0.1): the profile's other numbers (peaks,
      // bandwidths) are then what is off.
      const double span = std::abs(to_coord(p, e.upper) - to_coord(p, std::max(e.lower, 1e-6)));
      for (const auto& [bound, which] : {std::pair{e.lower, "lower"}, std::pair{e.upper, "upper"}}) {
        if (std::abs(to_coord(p, e.value) - to_coord(p, std::max(bound, 1e-6))) <= 1e-3 * span) {
          e.note = std::string("at its ") + which + " bound";
          out.warnings.push_back(std::string("parameter ") + p.name + " is at its " + which + " bound: " +
                                 (p.calibrated ? "the runs want it at or beyond the bound (a step term of 1 us or "
                                                 "0.1 us is none)"
                                               : "the base profile's peaks or bandwidths may be off"));
        }
      }
    }
    out.params.push_back(std::move(e));
  }
  out.fitted = fin->profile(pass.coords);
  out.loss = pass.loss;
  out.residuals = static_cast<std::int64_t>(pr.slots.size());
  out.evaluations = fin->evaluations;
  return out;
}

namespace {

MetricStats stats_of(std::vector<double> v) {
  MetricStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (const double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.p50 = percentile_linear(v, 50);
  s.p90 = percentile_linear(v, 90);
  return s;
}

}  // namespace

RunScore score_run(const FitRun& run, const FitProfile& profile, const FitOptions& options, bool complement) {
  const std::vector<RequestRecord> predicted = replay_run(run, profile, options);
  if (run.scrape) return score_scrape_run(run, predicted, complement);
  RunScore score;
  score.run = run.path;
  for (int m = 0; m < 3; ++m) {
    std::vector<double> meas, pred;
    double abs_err = 0;
    for (std::size_t i = 0; i < run.measured.size(); ++i) {
      if ((run.scored[i] != 0) == complement) continue;
      const double a = metric_ms(run.measured[i], m), b = metric_ms(predicted[i], m);
      if (!std::isfinite(a) || !std::isfinite(b) || a <= 0) continue;
      meas.push_back(a);
      pred.push_back(b);
      abs_err += std::abs(b - a) / a;
    }
    MetricScore ms;
    ms.metric = kFitMetricNames[m];
    ms.count = static_cast<std::int64_t>(meas.size());
    ms.measured = stats_of(meas);
    ms.predicted = stats_of(pred);
    ms.mean_abs_request_error_pct = meas.empty() ? 0 : 100 * abs_err / static_cast<double>(meas.size());
    score.metrics.push_back(ms);
  }
  return score;
}

}  // namespace twin
