#include "engine/profiler/step_overhead.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "base/error.hpp"
#include "engine/core/replica.hpp"
#include "engine/profiler/op_timer.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/prompt_tokens.hpp"
#include "engine/runtime/engine.hpp"
#include "engine/runtime/wait_until.hpp"

namespace twin {

StepClass step_class(const BatchShape& shape) {
  bool decode = false, prefill = false;
  for (const SeqShape& s : shape.seqs) {
    if (s.new_tokens <= 0) continue;
    (s.new_tokens == 1 && s.context_tokens > 0 ? decode : prefill) = true;
  }
  return decode && prefill ? StepClass::mixed : (decode ? StepClass::decode : StepClass::prefill);
}

const char* step_class_name(StepClass c) {
  switch (c) {
    case StepClass::decode: return "decode";
    case StepClass::prefill: return "prefill";
    case StepClass::mixed: return "mixed";
  }
  return "?";
}

namespace {

// The engine for calibration's own scenarios: the settings' model, backend,
// weights and dtypes; the vLLM preset, with exactly the KV blocks and
// max_model_len the scenarios need.
std::unique_ptr<Engine> scenario_engine(EngineSettings settings, std::int32_t max_len, std::int64_t blocks) {
  ReplicaConfig rc = replica_preset("vllm");
  set_replica_option(rc, "max_model_len", std::to_string(max_len));
  rc.kv.block_size = settings.runner.block_size;
  rc.kv.num_blocks = static_cast<std::int32_t>(blocks);
  settings.replica = rc;
  return std::make_unique<Engine>(std::move(settings));
}

}  // namespace

std::vector<MeasuredStep> measure_steps(EngineSettings settings, const std::vector<StepScenario>& scenarios,
                                        std::int32_t rounds,
                                        const std::function<void(std::size_t done, std::size_t total)>& progress) {
  const ModelConfig config = engine_model_config(settings);
  std::int32_t max_len = 0;
  std::int64_t blocks = 0;
  const std::int32_t bs = settings.runner.block_size;
  for (const StepScenario& s : scenarios) {
    max_len = std::max({max_len, s.prompt + s.output, s.inject_prompt + s.output});
    const std::int64_t per = (s.prompt + s.output + bs - 1) / bs + 1;
    const std::int64_t inj = (s.inject_prompt + s.output + bs - 1) / bs + 1;
    blocks = std::max(blocks, per * s.requests + inj * s.inject_count);
  }
  if (max_len > config.max_position_embeddings) {
    throw UsageError("profiler: step scenarios need " + std::to_string(max_len) + " positions, the model has " +
                     std::to_string(config.max_position_embeddings));
  }
  settings.model_config = config;
  // In-situ op times, for the per-kind scales: marks between ops, read at
  // the end of each pass, so the step itself runs as untimed.
  settings.time_ops = true;
  const std::unique_ptr<Engine> engine = scenario_engine(std::move(settings), max_len, blocks + 1);
  const std::uint64_t seed = engine->settings().runner.seed;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  auto clock = [&]() -> Time { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(); };

  std::vector<MeasuredStep> out;
  RequestId next_id = 1;
  // The first scenario runs twice; its first pass warms caches, the thread
  // pool and the allocator, and is dropped.
  std::vector<StepScenario> runs;
  if (!scenarios.empty()) runs.push_back(scenarios.front());
  for (std::int32_t r = 0; r < rounds; ++r) runs.insert(runs.end(), scenarios.begin(), scenarios.end());
  for (std::size_t run = 0; run < runs.size(); ++run) {
    const StepScenario& sc = runs[run];
    const bool keep = run > 0;
    Replica replica(engine->replica_config(), 0);
    Executor executor(engine->runner());
    auto submit = [&](std::int32_t prompt, Time now) {
      Request r;
      r.id = next_id++;
      r.arrival = now;
      r.prompt_len = prompt;
      r.output_len = sc.output;
      materialize_prompt_tokens(r, config.vocab_size, seed);
      replica.add(std::move(r), now);
    };
    Time now = clock();
    for (std::int32_t i = 0; i < sc.requests; ++i) submit(sc.prompt, now);
    std::int32_t injected = 0, steps = 0;
    while (replica.has_work()) {
      if (sc.inject_every > 0 && injected < sc.inject_count && steps > 0 && steps % sc.inject_every == 0) {
        submit(sc.inject_prompt, now);
        ++injected;
      }
      // As the driver: the step runs from the instant it is planned (the
      // previous completion) to the end of its forward pass.
      const Time start = now;
      const StepPlan plan = replica.plan(now);
      if (plan.empty()) break;
      const StepResult result = executor.execute(plan, replica);
      now = std::max(clock(), start + 1);
      replica.complete(plan, result, now);
      for (const RequestRecord& r : replica.take_finished()) executor.forget(r.id);
      MeasuredStep m;
      m.label = sc.label;
      for (const ScheduledSeq& q : plan.seqs) m.shape.seqs.push_back({q.num_new, q.num_computed, q.samples});
      m.measured_ns = static_cast<double>(now - start);
      if (!executor.step_op_times().empty()) m.op_ns = executor.step_op_times().back().second;
      if (keep) out.push_back(std::move(m));
      ++steps;
    }
    if (progress) progress(run + 1, runs.size());
  }
  return out;
}

namespace {

// Minimises sum_i w_i (t . x_i - y_i)^2 with every t_j >= 0 (t_0 > 0 and
// never pinned when first_positive): each active set (which coordinates are
// pinned at 0) is solved by its normal equations and the cheapest feasible
// one wins. Coordinates are few (2 or 3), so trying every set is exact and
// cheap. Returns `fallback` when no set beats it.
std::vector<double> nonneg_lsq(const std::vector<std::vector<double>>& x, const std::vector<double>& y,
                               const std::vector<double>& w, bool first_positive, std::vector<double> fallback) {
  const std::size_t dims = fallback.size();
  auto cost = [&](const std::vector<double>& t) {
    double c = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      double e = -y[i];
      for (std::size_t j = 0; j < dims; ++j) e += t[j] * x[i][j];
      c += w[i] * e * e;
    }
    return c;
  };
  std::vector<double> best = fallback;
  double best_cost = cost(best);
  for (unsigned mask = 0; mask < (1u << dims); ++mask) {
    if (first_positive && !(mask & 1u)) continue;
    std::vector<std::size_t> free;
    for (std::size_t j = 0; j < dims; ++j) {
      if (mask & (1u << j)) free.push_back(j);
    }
    const std::size_t n = free.size();
    std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));  // normal equations
    for (std::size_t i = 0; i < x.size(); ++i) {
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = 0; c < n; ++c) a[r][c] += w[i] * x[i][free[r]] * x[i][free[c]];
        a[r][n] += w[i] * x[i][free[r]] * y[i];
      }
    }
    bool singular = false;
    for (std::size_t c = 0; c < n && !singular; ++c) {  // Gauss-Jordan with partial pivoting
      std::size_t piv = c;
      for (std::size_t r = c + 1; r < n; ++r) {
        if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
      }
      if (!(std::abs(a[piv][c]) > 1e-300)) {
        singular = true;
        break;
      }
      std::swap(a[c], a[piv]);
      for (std::size_t r = 0; r < n; ++r) {
        if (r == c) continue;
        const double f = a[r][c] / a[c][c];
        for (std::size_t k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
      }
    }
    if (singular) continue;
    std::vector<double> t(dims, 0.0);
    bool feasible = true;
    for (std::size_t r = 0; r < n; ++r) {
      t[free[r]] = a[r][n] / a[r][r];
      if (!std::isfinite(t[free[r]]) || t[free[r]] < 0) feasible = false;
    }
    if (first_positive && !(t[0] > 0)) feasible = false;
    if (!feasible) continue;
    const double c = cost(t);
    if (c < best_cost) {
      best_cost = c;
      best = t;
    }
  }
  return best;
}

// Weights of a least-squares fit on the relative error of `measured`.
std::vector<double> relative_weights(const std::vector<double>& measured) {
  std::vector<double> w;
  w.reserve(measured.size());
  for (double m : measured) w.push_back(1.0 / (std::max(m, 1.0) * std::max(m, 1.0)));
  return w;
}

double sum_of(const OpTimes& t) {
  double s = 0;
  for (double v : t) s += v;
  return s;
}

}  // namespace

StepFit fit_step_terms(const std::vector<std::array<double, 3>>& features, const std::vector<double>& measured) {
  StepFit best;
  if (features.empty() || features.size() != measured.size()) return best;
  // Minimise the RELATIVE error of the step time: an unweighted fit lets the
  // long prefill steps (whose residuals are mostly op-table noise of tens of
  // ms) set terms that under-predict every short decode step.
  std::vector<std::vector<double>> x;
  for (const auto& f : features) x.push_back({f[0], f[1], f[2]});
  const std::vector<double> t = nonneg_lsq(x, measured, relative_weights(measured), true, {1.0, 0.0, 0.0});
  best.op_scale = t[0];
  best.base_ns = t[1];
  best.per_seq_ns = t[2];
  return best;
}


namespace {

// A group of steps (StepSample::group) reduced to its medians.
struct GroupMedian {
  std::string label;
  double seqs, tokens, measured, table_sum, in_situ_sum;
  OpTimes table, in_situ;
};

// The groups in first-seen order (deterministic), each at its medians.
std::vector<GroupMedian> group_medians(const std::vector<StepSample>& steps) {
  struct Group {
    std::vector<double> seqs, tokens, measured, table_sum, in_situ_sum;
    std::array<std::vector<double>, kNumTimedOps> table, in_situ;
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  for (const StepSample& s : steps) {
    if (!groups.count(s.group)) order.push_back(s.group);
    Group& g = groups[s.group];
    g.seqs.push_back(s.num_seqs);
    g.tokens.push_back(s.new_tokens);
    g.measured.push_back(s.measured_ns);
    g.table_sum.push_back(sum_of(s.table_ns));
    g.in_situ_sum.push_back(sum_of(s.in_situ_ns));
    for (int k = 0; k < kNumTimedOps; ++k) {
      g.table[k].push_back(s.table_ns[k]);
      g.in_situ[k].push_back(s.in_situ_ns[k]);
    }
  }
  std::vector<GroupMedian> med;
  for (const std::string& key : order) {
    const Group& g = groups.at(key);
    GroupMedian m{key,
                  quantile(g.seqs, 0.5),
                  quantile(g.tokens, 0.5),
                  quantile(g.measured, 0.5),
                  quantile(g.table_sum, 0.5),
                  quantile(g.in_situ_sum, 0.5),
                  {},
                  {}};
    for (int k = 0; k < kNumTimedOps; ++k) {
      m.table[k] = quantile(g.table[k], 0.5);
      m.in_situ[k] = quantile(g.in_situ[k], 0.5);
    }
    med.push_back(m);
  }
  return med;
}

// The ops of a step at the fit's scales and fixed costs.
double scaled_ops(const OpScaleFit& fit, const OpTimes& table) {
  double t = 0;
  for (int k = 0; k < kNumTimedOps; ++k) t += fit.scales[k] * table[k] + (table[k] > 0 ? fit.fixed[k] : 0.0);
  return fit.op_scale * t;
}

double predict(const OpScaleFit& fit, const OpTimes& table, double seqs) {
  return scaled_ops(fit, table) + fit.base_ns + fit.per_seq_ns * seqs;
}

// Timed op k's scale (and fixed cost) from the groups' in-situ times.
void fit_op_kind(OpScaleFit& fit, int k, const std::vector<GroupMedian>& med, bool fixed_costs) {
  // in_situ ~ s x table + c per step (s > 0, c >= 0), minimising
  // sum ((s t + c - u) / M)^2 over the groups, M the group's measured
  // step. The intercept keeps a fixed cost per call (a thread pool's
  // dispatch, a launch gap) out of the scale, which alone would
  // stretch it to the small groups and overshoot the large ones.
  std::vector<std::vector<double>> x;
  std::vector<double> y, w1;
  for (const GroupMedian& m : med) {
    if (!(m.table[k] > 0) || !(m.in_situ[k] > 0) || !(m.measured > 0)) continue;
    x.push_back({m.table[k] / m.measured, 1.0 / m.measured});
    y.push_back(m.in_situ[k] / m.measured);
    w1.push_back(1.0);
  }
  if (x.empty()) return;
  // One group cannot tell a scale from an intercept: scale only.
  std::vector<double> st;
  if (x.size() < 2 || !fixed_costs) {
    std::vector<std::vector<double>> scale_only;
    for (const std::vector<double>& row : x) scale_only.push_back({row[0]});
    st = nonneg_lsq(scale_only, y, w1, true, {1.0});
  } else {
    st = nonneg_lsq(x, y, w1, true, {1.0, 0.0});
  }
  if (st[0] > 0) fit.scales[k] = std::clamp(st[0], kMinOpScale, kMaxOpScale);
  if (st.size() > 1) fit.fixed[k] = st[1];
}

// With in-situ times: a scale per timed op, then the step terms on what the
// scaled ops leave unexplained.
void fit_per_kind(OpScaleFit& fit, const std::vector<GroupMedian>& med, const std::vector<double>& measured,
                  bool fixed_costs) {
  fit.per_kind = true;
  for (int k = 0; k < kNumTimedOps; ++k) fit_op_kind(fit, k, med, fixed_costs);
  std::vector<std::vector<double>> x;
  std::vector<double> rest;
  for (const GroupMedian& m : med) {
    x.push_back({1.0, m.seqs});
    rest.push_back(m.measured - scaled_ops(fit, m.table));
  }
  const std::vector<double> t = nonneg_lsq(x, rest, relative_weights(measured), false, {0.0, 0.0});
  fit.base_ns = t[0];
  fit.per_seq_ns = t[1];
}

// Without in-situ times: one global scale (fit_step_terms).
void fit_global(OpScaleFit& fit, const std::vector<GroupMedian>& med, const std::vector<double>& measured) {
  std::vector<std::array<double, 3>> features;
  for (const GroupMedian& m : med) features.push_back({m.table_sum, 1.0, m.seqs});
  const StepFit f = fit_step_terms(features, measured);
  // The profile reader's range (a fit from degenerate samples may leave it).
  fit.op_scale = std::clamp(f.op_scale, kMinOpScale, kMaxOpScale);
  fit.base_ns = f.base_ns;
  fit.per_seq_ns = f.per_seq_ns;
}

// Per group, at its medians: measured and predicted.
void add_samples(OpScaleFit& fit, const std::vector<GroupMedian>& med) {
  for (const GroupMedian& m : med) {
    OverheadSample sample;
    sample.label = m.label;
    sample.num_seqs = m.seqs;
    sample.new_tokens = m.tokens;
    sample.measured_ns = m.measured;
    sample.ops_ns = m.table_sum;
    sample.in_situ_ns = m.in_situ_sum;
    sample.predicted_ns = std::max(0.0, predict(fit, m.table, m.seqs));
    fit.samples.push_back(sample);
  }
}

// The quality figures, over every step (not the groups' medians).
void add_quality(OpScaleFit& fit, const std::vector<StepSample>& steps) {
  StepFitQuality& q = fit.quality;
  double err_sum = 0, ratio_sum = 0, in_situ_sum = 0;
  q.unscaled_ratio_min = std::numeric_limits<double>::infinity();
  for (const StepSample& s : steps) {
    if (!(s.measured_ns > 0)) continue;
    ++q.steps;
    const double err = std::abs(predict(fit, s.table_ns, s.num_seqs) - s.measured_ns) / s.measured_ns;
    const double ratio = sum_of(s.table_ns) / s.measured_ns;
    err_sum += err;
    q.max_abs_error = std::max(q.max_abs_error, err);
    ratio_sum += ratio;
    q.unscaled_ratio_min = std::min(q.unscaled_ratio_min, ratio);
    q.unscaled_ratio_max = std::max(q.unscaled_ratio_max, ratio);
    in_situ_sum += sum_of(s.in_situ_ns) / s.measured_ns;
  }
  if (q.steps > 0) {
    const double n = static_cast<double>(q.steps);
    q.mean_abs_error = err_sum / n;
    q.unscaled_ratio_mean = ratio_sum / n;
    q.in_situ_ratio_mean = in_situ_sum / n;
  } else {
    q.unscaled_ratio_min = 0;
  }
}

}  // namespace

OpScaleFit fit_op_scales(const std::vector<StepSample>& steps, bool fixed_costs) {
  OpScaleFit fit;
  fit.scales.fill(1.0);
  if (steps.empty()) return fit;
  const std::vector<GroupMedian> med = group_medians(steps);
  std::vector<double> measured;
  for (const GroupMedian& m : med) measured.push_back(m.measured);
  const bool any_in_situ =
      std::any_of(steps.begin(), steps.end(), [](const StepSample& s) { return sum_of(s.in_situ_ns) > 0; });
  if (any_in_situ) {
    fit_per_kind(fit, med, measured, fixed_costs);
  } else {
    fit_global(fit, med, measured);
  }
  add_samples(fit, med);
  add_quality(fit, steps);
  return fit;
}

StepOverhead fit_step_overhead(const std::vector<MeasuredStep>& steps, const CalibratedTables& tables,
                               const ModelDesc& model, Dtype weights, Dtype kv, bool fixed_costs) {
  const bool moe = model.is_moe();
  std::vector<StepSample> samples;
  std::vector<Op> ops;
  for (const MeasuredStep& s : steps) {
    StepSample x;
    x.group = s.label + " " + step_class_name(step_class(s.shape));
    x.measured_ns = s.measured_ns;
    x.in_situ_ns = s.op_ns;
    for (const SeqShape& q : s.shape.seqs) {
      x.new_tokens += static_cast<double>(q.new_tokens);
      x.num_seqs += q.new_tokens > 0 ? 1 : 0;
    }
    ops.clear();
    step_ops(model, s.shape, ParallelLayout{}, weights, kv, 0, ops);
    for (const Op& op : ops) {
      const int k = timed_op_of(op.kind, moe);
      if (k >= 0) x.table_ns[static_cast<std::size_t>(k)] += tables.op_time(op).time_ns * op.repeat;
    }
    samples.push_back(std::move(x));
  }
  const OpScaleFit fit = fit_op_scales(samples, fixed_costs);
  StepOverhead o;
  o.op_scale = fit.op_scale;
  o.base_ns = fit.base_ns;
  o.per_seq_ns = fit.per_seq_ns;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const int t = timed_op_of(static_cast<OpKind>(k), moe);
    if (t >= 0) o.op_scales[static_cast<std::size_t>(k)] = fit.scales[static_cast<std::size_t>(t)];
  }
  o.op_fixed_ns = fit.fixed;
  o.fit = fit.quality;
  o.samples = fit.samples;
  return o;
}

IdleWarmup fit_idle_warmup(std::vector<IdleSample> samples) {
  IdleWarmup best;
  best.samples = std::move(samples);
  double best_cost = 0;
  for (const IdleSample& s : best.samples) best_cost += s.extra_ns * s.extra_ns;
  // tau over a log grid from 50 us to 1 s; the amplitude in closed form.
  for (int i = 0; i <= 56; ++i) {
    const double tau = 50e3 * std::pow(20000.0, i / 56.0);
    double ff = 0, fy = 0;
    for (const IdleSample& s : best.samples) {
      const double f = -std::expm1(-s.gap_ns / tau);
      ff += f * f;
      fy += f * s.extra_ns;
    }
    if (!(ff > 0) || fy <= 0) continue;
    const double amp = fy / ff;
    double cost = 0;
    for (const IdleSample& s : best.samples) {
      const double e = amp * -std::expm1(-s.gap_ns / tau) - s.extra_ns;
      cost += e * e;
    }
    if (cost < best_cost) {
      best_cost = cost;
      best.idle_ns = amp;
      best.idle_tau_ns = tau;
    }
  }
  return best;
}

IdleWarmup measure_idle_warmup(EngineSettings settings, std::int32_t prompt, const std::vector<double>& gaps_ns,
                               std::int32_t rounds) {
  const ModelConfig config = engine_model_config(settings);
  if (prompt < 1 || prompt >= config.max_position_embeddings) {
    throw UsageError("profiler: the idle warm-up prompt must be 1 to " +
                     std::to_string(config.max_position_embeddings - 1) + " tokens, got " + std::to_string(prompt));
  }
  const std::int32_t bs = settings.runner.block_size;
  settings.model_config = config;
  settings.time_ops = false;
  const std::unique_ptr<Engine> engine = scenario_engine(std::move(settings), prompt + 1, (prompt + 1 + bs - 1) / bs + 2);
  const std::uint64_t seed = engine->settings().runner.seed;
  Replica replica(engine->replica_config(), 0);
  Executor executor(engine->runner());
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  auto clock = [&]() -> Time { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(); };

  RequestId next_id = 1;
  Time now = clock();
  // One prefill at `at`: submitted, planned and run from that instant.
  auto step_at = [&](Time at) {
    Request r;
    r.id = next_id++;
    r.arrival = at;
    r.prompt_len = prompt;
    r.output_len = 1;
    materialize_prompt_tokens(r, config.vocab_size, seed);
    replica.add(std::move(r), at);
    const StepPlan plan = replica.plan(at);
    if (plan.empty()) throw Error("profiler: the idle warm-up step was not scheduled");
    const StepResult result = executor.execute(plan, replica);
    const Time done = std::max(clock(), at + 1);
    replica.complete(plan, result, done);
    for (const RequestRecord& rec : replica.take_finished()) executor.forget(rec.id);
    now = done;
    return static_cast<double>(done - at);
  };
  for (int i = 0; i < 3; ++i) step_at(now);  // warm caches, the pool and the allocator
  std::vector<std::vector<double>> times(gaps_ns.size());
  for (std::int32_t round = 0; round < rounds; ++round) {
    // Rotate the order each round so a drifting machine hits every gap alike.
    for (std::size_t k = 0; k < gaps_ns.size(); ++k) {
      const std::size_t g = (k + static_cast<std::size_t>(round)) % gaps_ns.size();
      const Time wake = now + static_cast<Time>(gaps_ns[g]);
      if (wake > now) wait_until(t0 + std::chrono::nanoseconds(wake));
      times[g].push_back(step_at(wake));
    }
  }
  double base = -1;
  for (std::size_t g = 0; g < gaps_ns.size(); ++g) {
    if (gaps_ns[g] <= 0) base = quantile(times[g], 0.5);
  }
  std::vector<IdleSample> samples;
  for (std::size_t g = 0; g < gaps_ns.size(); ++g) {
    IdleSample s;
    s.gap_ns = gaps_ns[g];
    s.measured_ns = quantile(times[g], 0.5);
    s.extra_ns = base >= 0 ? s.measured_ns - base : 0;
    samples.push_back(s);
  }
  return fit_idle_warmup(std::move(samples));
}

}  // namespace twin
