#include "engine/profiler/step_overhead.hpp"

#include <algorithm>
#include <chrono>
#include <map>

#include "engine/core/error.hpp"
#include "engine/core/replica.hpp"
#include "engine/profiler/op_timer.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/prompt_tokens.hpp"

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
                                        const std::vector<StepScenario>& scenarios) {
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
  runs.insert(runs.end(), scenarios.begin(), scenarios.end());
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

StepOverhead fit_step_overhead(const std::vector<MeasuredStep>& steps, const CalibratedTables& tables,
                               const ModelDesc& model, Dtype weights, Dtype kv) {
  struct Group {
    std::vector<double> seqs, tokens, measured, ops, residual;
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
    g.residual.push_back(s.measured_ns - l.ops_ns);
  }
  StepOverhead o;
  std::vector<double> xs, rs;
  for (const std::string& key : order) {
    const Group& g = groups.at(key);
    OverheadSample sample;
    sample.label = key;
    sample.num_seqs = quantile(g.seqs, 0.5);
    sample.new_tokens = quantile(g.tokens, 0.5);
    sample.measured_ns = quantile(g.measured, 0.5);
    sample.ops_ns = quantile(g.ops, 0.5);
    o.samples.push_back(sample);
    xs.push_back(sample.num_seqs);
    rs.push_back(quantile(g.residual, 0.5));
  }
  if (xs.empty()) return o;
  // Fit residual = base + per_seq * seqs with both terms >= 0, minimising
  // the RELATIVE error of the step time: an unweighted fit lets the long
  // prefill groups (whose residuals are mostly op-table noise of tens of ms)
  // set a negative base that then under-predicts every short decode step.
  std::vector<double> ws;
  for (const OverheadSample& sample : o.samples) {
    const double m = std::max(sample.measured_ns, 1.0);
    ws.push_back(1.0 / (m * m));
  }
  auto cost = [&](double base, double slope) {
    double c = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double e = base + slope * xs[i] - rs[i];
      c += ws[i] * e * e;
    }
    return c;
  };
  double sw = 0, swx = 0, swr = 0, swxx = 0, swxr = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    sw += ws[i];
    swx += ws[i] * xs[i];
    swr += ws[i] * rs[i];
    swxx += ws[i] * xs[i] * xs[i];
    swxr += ws[i] * xs[i] * rs[i];
  }
  // Candidates: the unconstrained fit when both terms come out >= 0, a
  // constant only, a slope only, nothing; the cheapest feasible one wins.
  std::vector<std::pair<double, double>> candidates = {{0.0, 0.0}};
  if (sw > 0) candidates.emplace_back(std::max(0.0, swr / sw), 0.0);
  if (swxx > 0) candidates.emplace_back(0.0, std::max(0.0, swxr / swxx));
  const double det = sw * swxx - swx * swx;
  if (det > 0) {
    const double base = (swxx * swr - swx * swxr) / det;
    const double slope = (sw * swxr - swx * swr) / det;
    if (base >= 0 && slope >= 0) candidates.emplace_back(base, slope);
  }
  double best = cost(0.0, 0.0);
  for (const auto& [base, slope] : candidates) {
    const double c = cost(base, slope);
    if (c < best) {
      best = c;
      o.base_ns = base;
      o.per_seq_ns = slope;
    }
  }
  return o;
}

}  // namespace twin
