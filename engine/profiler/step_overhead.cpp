#include "engine/profiler/step_overhead.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>

#include "engine/core/error.hpp"
#include "engine/core/replica.hpp"
#include "engine/profiler/op_timer.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/prompt_tokens.hpp"
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

std::vector<MeasuredStep> measure_steps(const ModelConfig& config, RunnerOptions runner_options,
                                        const std::vector<StepScenario>& scenarios, std::int32_t rounds) {
  std::int32_t max_len = 0;
  std::int64_t blocks = 0;
  const std::int32_t bs = runner_options.block_size;
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
  runner_options.num_blocks = static_cast<std::int32_t>(blocks + 1);
  ModelRunner runner(config, runner_options);
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
    ReplicaConfig rc = replica_preset("vllm");
    set_replica_option(rc, "max_model_len", std::to_string(max_len));
    rc.kv.num_blocks = runner_options.num_blocks;
    validate(rc);
    Replica replica(rc, 0);
    Executor executor(runner);
    auto submit = [&](std::int32_t prompt, Time now) {
      Request r;
      r.id = next_id++;
      r.arrival = now;
      r.prompt_len = prompt;
      r.output_len = sc.output;
      materialize_prompt_tokens(r, config.vocab_size, runner_options.seed);
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
      if (keep) out.push_back(std::move(m));
      ++steps;
    }
  }
  return out;
}

StepFit fit_step_terms(const std::vector<std::array<double, 3>>& features, const std::vector<double>& measured) {
  StepFit best;
  if (features.empty() || features.size() != measured.size()) return best;
  // Minimise the RELATIVE error of the step time: an unweighted fit lets the
  // long prefill steps (whose residuals are mostly op-table noise of tens of
  // ms) set terms that under-predict every short decode step.
  std::vector<double> w;
  for (double m : measured) w.push_back(1.0 / (std::max(m, 1.0) * std::max(m, 1.0)));
  auto cost = [&](const std::array<double, 3>& t) {
    double c = 0;
    for (std::size_t i = 0; i < features.size(); ++i) {
      double e = -measured[i];
      for (int j = 0; j < 3; ++j) e += t[j] * features[i][j];
      c += w[i] * e * e;
    }
    return c;
  };
  double best_cost = cost({best.op_scale, best.base_ns, best.per_seq_ns});
  // The scale is always free; base and per_seq are free or pinned at 0
  // (each must come out >= 0): the cheapest feasible active set wins.
  for (int mask = 0; mask < 4; ++mask) {
    std::vector<int> free = {0};
    if (mask & 1) free.push_back(1);
    if (mask & 2) free.push_back(2);
    const std::size_t n = free.size();
    std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));  // normal equations
    for (std::size_t i = 0; i < features.size(); ++i) {
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t c = 0; c < n; ++c) a[r][c] += w[i] * features[i][free[r]] * features[i][free[c]];
        a[r][n] += w[i] * features[i][free[r]] * measured[i];
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
    std::array<double, 3> t = {0, 0, 0};
    for (std::size_t r = 0; r < n; ++r) t[free[r]] = a[r][n] / a[r][r];
    if (!(t[0] > 0) || t[1] < 0 || t[2] < 0 || !std::isfinite(t[0] + t[1] + t[2])) continue;
    const double c = cost(t);
    if (c < best_cost) {
      best_cost = c;
      best.op_scale = t[0];
      best.base_ns = t[1];
      best.per_seq_ns = t[2];
    }
  }
  return best;
}

StepOverhead fit_step_overhead(const std::vector<MeasuredStep>& steps, const CalibratedTables& tables,
                               const ModelDesc& model, Dtype weights, Dtype kv) {
  struct Group {
    std::vector<double> seqs, tokens, measured, ops;
  };
  std::map<std::string, Group> groups;  // ordered: deterministic layout
  std::vector<std::string> order;
  std::vector<Op> scratch;
  for (const MeasuredStep& s : steps) {
    const StepLookup l = lookup_step(tables, model, s.shape, ParallelLayout{}, weights, kv, 0, scratch);
    const std::string key = s.label + " " + step_class_name(step_class(s.shape));
    if (!groups.count(key)) order.push_back(key);
    Group& g = groups[key];
    double tokens = 0;
    for (const SeqShape& q : s.shape.seqs) tokens += static_cast<double>(q.new_tokens);
    g.seqs.push_back(static_cast<double>(l.num_seqs));
    g.tokens.push_back(tokens);
    g.measured.push_back(s.measured_ns);
    g.ops.push_back(l.ops_ns);
  }
  StepOverhead o;
  std::vector<std::array<double, 3>> features;  // (sum of ops, 1, seqs)
  std::vector<double> measured;
  for (const std::string& key : order) {
    const Group& g = groups.at(key);
    OverheadSample sample;
    sample.label = key;
    sample.num_seqs = quantile(g.seqs, 0.5);
    sample.new_tokens = quantile(g.tokens, 0.5);
    sample.measured_ns = quantile(g.measured, 0.5);
    sample.ops_ns = quantile(g.ops, 0.5);
    o.samples.push_back(sample);
    features.push_back({sample.ops_ns, 1.0, sample.num_seqs});
    measured.push_back(sample.measured_ns);
  }
  const StepFit fit = fit_step_terms(features, measured);
  o.op_scale = fit.op_scale;
  o.base_ns = fit.base_ns;
  o.per_seq_ns = fit.per_seq_ns;
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

IdleWarmup measure_idle_warmup(const ModelConfig& config, RunnerOptions runner_options, std::int32_t prompt,
                               const std::vector<double>& gaps_ns, std::int32_t rounds) {
  if (prompt < 1 || prompt >= config.max_position_embeddings) {
    throw UsageError("profiler: the idle warm-up prompt must be 1 to " +
                     std::to_string(config.max_position_embeddings - 1) + " tokens, got " + std::to_string(prompt));
  }
  const std::int32_t bs = runner_options.block_size;
  runner_options.num_blocks = (prompt + 1 + bs - 1) / bs + 2;
  ModelRunner runner(config, runner_options);
  ReplicaConfig rc = replica_preset("vllm");
  set_replica_option(rc, "max_model_len", std::to_string(prompt + 1));
  rc.kv.num_blocks = runner_options.num_blocks;
  validate(rc);
  Replica replica(rc, 0);
  Executor executor(runner);
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
    materialize_prompt_tokens(r, config.vocab_size, runner_options.seed);
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
