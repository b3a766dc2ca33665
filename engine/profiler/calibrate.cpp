#include "engine/profiler/calibrate.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <optional>
#include <string_view>
#include <unistd.h>

#include "base/error.hpp"
#include "engine/profiler/op_bench.hpp"
#include "engine/profiler/step_overhead.hpp"
#include "engine/runtime/model_config.hpp"
#include "hwprofiles/calibrated_lookup.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/forward_program.hpp"
#include "models/model_math.hpp"

#include "git_commit.hpp"  // generated at every build (git_commit.cmake)

#ifndef TWIN_VERSION
#define TWIN_VERSION "unknown"
#endif

namespace twin {
namespace {

using Clock = std::chrono::steady_clock;

// Token counts 1, 2, 3, 4, 6, 8, 12, ... (x1.5 / x1.33 steps) up to `top`,
// which is always the last point; coarse: 1, 2, 3, 4, then every other.
std::vector<std::int64_t> log_grid(std::int64_t top, bool coarse) {
  std::vector<std::int64_t> out;
  for (std::int64_t p = 1; p <= top; p *= 2) {
    out.push_back(p);
    if (!coarse && p >= 2 && p + p / 2 <= top) out.push_back(p + p / 2);
  }
  if (coarse) {
    // 1 to 4 always: decode batches live there, and kernels switch paths
    // there (the CPU GEMM is a GEMV at one row), which interpolation across
    // 1 -> 4 would smear.
    std::vector<std::int64_t> thin;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] <= 4 || i % 2 == 0) thin.push_back(out[i]);
    }
    out = thin;
  }
  if (out.empty() || out.back() != top) out.push_back(top);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "unknown";
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The op of `kind` step_ops emits for `batch`.
// A one-token chunk after a context is a decode to step_ops; the prefill
// table's first row still wants it (same formulas), relabelled.
Op op_of(const ModelDesc& m, const BatchShape& batch, Dtype w, Dtype kv, OpKind kind) {
  std::vector<Op> ops;
  step_ops(m, batch, ParallelLayout{}, w, kv, 0, ops);
  for (Op& op : ops) {
    if (op.kind == OpKind::attn_decode && kind == OpKind::attn_prefill && op.num_seqs == 1) op.kind = kind;
    if (op.kind == kind) return op;
  }
  throw Error("profiler: step_ops emits no '" + std::string(op_name(kind)) + "' for this batch");
}

BatchShape one_seq(std::int64_t tokens, std::int64_t context, bool samples) {
  BatchShape b;
  b.seqs.push_back({tokens, context, samples});
  return b;
}

BatchShape many_seqs(std::int64_t seqs, std::int64_t tokens, std::int64_t context, bool samples) {
  BatchShape b;
  b.seqs.assign(static_cast<std::size_t>(seqs), SeqShape{tokens, context, samples});
  return b;
}

CalibratedPoint point(double x, const Op& op, const TimingStats& t) {
  return {x, t.median_ns, t.p10_ns, t.p90_ns, op.flops, op.bytes};
}

void check_tp(const CalibrateOptions& options) {
  if (options.tp == 1) return;
  throw UsageError(options.engine.backend == "cpu"
                       ? "calibrate: --tp " + std::to_string(options.tp) +
                             " cannot run on the CPU backend (one process, no collectives); use --tp 1"
                       : "calibrate: --tp " + std::to_string(options.tp) + ": the engine runs one device; use --tp 1");
}

// The repeats of a point over the whole calibration.
TimingPolicy timing_policy(bool quick) {
  TimingPolicy policy;
  if (quick) {
    policy.warmup = 1;
    policy.min_repeats = 3;
    policy.max_repeats = 3;
    policy.budget_ns = 0;
  } else {
    policy.warmup = 1;
    policy.min_repeats = 5;
    policy.max_repeats = 15;
    policy.budget_ns = 30e6;
  }
  return policy;
}

// The op kinds with a table: one curve per op kind the forward program
// prices a token-row call as (a MoE's router and expert GEMMs in place of
// the dense MLP), one per sampling-row call; attention has its grids.
void table_ops(const ModelDesc& model, std::vector<OpKind>& token_ops, std::vector<OpKind>& seq_ops) {
  for (ForwardCall call : forward_program(model.is_moe(), model.has_qk_norm())) {
    const ForwardCallInfo& info = call_info(call);
    if (info.rows == CallRows::attention) continue;
    std::vector<OpKind>& list = info.rows == CallRows::sampling ? seq_ops : token_ops;
    for (OpKind kind : info.priced_as())
      if (std::find(list.begin(), list.end(), kind) == list.end()) list.push_back(kind);
  }
}

// The points the tables are timed at.
struct Grids {
  std::vector<std::int64_t> tokens, seqs;  // the curves'
  std::vector<std::int64_t> prefill_n, contexts, batches, decode_ctx;  // the attention grids'
  std::int64_t kv_cap = 0;  // a decode point holds batch x context tokens of one layer's KV
  std::vector<OpKind> token_ops, seq_ops;

  Grids(const ModelDesc& model, std::int64_t max_tokens, std::int64_t max_seqs, std::int64_t context, bool quick)
      : tokens(log_grid(max_tokens, quick)), seqs(log_grid(max_seqs, quick)), kv_cap(quick ? 8192 : 131072) {
    for (std::int64_t n = 1; n <= max_tokens; n *= 4) prefill_n.push_back(n);
    if (prefill_n.back() != max_tokens) prefill_n.push_back(max_tokens);
    contexts.push_back(0);
    for (std::int64_t c = 16; c < context; c *= 4) contexts.push_back(c);
    for (std::int64_t b = 1; b <= max_seqs; b *= (quick ? 4 : 2)) batches.push_back(b);
    if (batches.back() != max_seqs) batches.push_back(max_seqs);
    for (std::int64_t c = 16; c < context; c *= 4) decode_ctx.push_back(c);
    table_ops(model, token_ops, seq_ops);
  }

  std::int64_t points(std::int64_t context) const {
    std::int64_t total = static_cast<std::int64_t>(token_ops.size() * tokens.size() + std::size(seq_ops) * seqs.size());
    for (std::int64_t n : prefill_n)
      for (std::int64_t c : contexts) total += n + c <= context ? 1 : 0;
    for (std::int64_t b : batches)
      for (std::int64_t c : decode_ctx) total += b * c <= kv_cap ? 1 : 0;
    return total;
  }
};

// Whole steps through the executor: decode-only, prefill-only and mixed;
// `repeats`: runs of each short prefill-only scenario (one step each).
std::vector<StepScenario> step_scenarios(bool quick, std::int64_t context, std::int32_t repeats) {
  const auto cap = [&](std::int64_t v) { return static_cast<std::int32_t>(std::min<std::int64_t>(v, context / 2)); };
  if (quick) {
    return {{"decode x1", 1, cap(16), 6, 0, 0, 0},
            {"decode x8", 8, cap(16), 6, 0, 0, 0},
            {"prefill", 1, cap(64), 1, 0, 0, 0},
            {"prefill", 1, cap(64), 1, 0, 0, 0},
            {"prefill", 1, cap(64), 1, 0, 0, 0},
            {"mixed x4", 4, cap(16), 8, 2, cap(48), 3}};
  }
  std::vector<StepScenario> scenarios = {{"decode x1", 1, cap(64), 24, 0, 0, 0},
                                         {"decode x8", 8, cap(64), 24, 0, 0, 0},
                                         {"decode x32", 32, cap(64), 16, 0, 0, 0},
                                         {"prefill 128", 1, cap(128), 1, 0, 0, 0},
                                         {"prefill 512", 1, cap(512), 1, 0, 0, 0},
                                         {"prefill 4x256", 4, cap(256), 1, 0, 0, 0},
                                         {"mixed x8", 8, cap(64), 24, 3, cap(256), 6}};
  const std::vector<StepScenario> base = scenarios;
  for (int r = 1; r < repeats; ++r)
    for (const StepScenario& s : base)
      if (s.output == 1) scenarios.push_back(s);
  return scenarios;
}

// The step model's line on the log: the scales per kind (or the global one)
// and the fit's quality.
void log_step_fit(std::ostream& log, const CalibratedProfile& p, std::size_t steps) {
  const StepOverhead& o = p.overhead;
  const StepFitQuality& q = o.fit;
  log << "calibrate: step model from " << steps << " engine steps: ";
  if (o.op_scale == 1) {
    // Kinds sharing a timed op share its scale (attention; MoE experts).
    log << "ops scaled per kind (";
    bool first = true;
    auto put = [&](std::string_view name, OpKind kind) {
      log << (first ? "" : ", ") << name << " " << o.op_scales[static_cast<std::size_t>(kind)];
      first = false;
    };
    for (const CurveTable& t : p.gemm) put(op_name(t.op), t.op);
    for (const CurveTable& t : p.elementwise) put(op_name(t.op), t.op);
    if (!p.attention.empty()) put("attention", p.attention.front().op);  // prefill and decode: one call
    log << ")";
  } else {
    log << o.op_scale << " x ops (no in-situ op times)";
  }
  log << " + " << o.base_ns / 1e3 << " us + " << o.per_seq_ns / 1e3 << " us per seq\n"
      << "calibrate: fit over " << q.steps << " steps: |predicted - measured| / measured mean "
      << 100 * q.mean_abs_error << "%, max " << 100 * q.max_abs_error << "%; unscaled table ops / step "
      << q.unscaled_ratio_mean << " (" << q.unscaled_ratio_min << " to " << q.unscaled_ratio_max
      << "), in-situ ops / step " << q.in_situ_ratio_mean << "\n";
}

// One calibration's state as its steps go: the sizes, the profile being
// filled and the op grid's timing.
struct Calibration {
  const ModelDesc& model;
  const CalibrateOptions& options;
  const Clock::time_point wall_start;
  const ModelConfig config;
  const std::int64_t context;
  const std::int64_t max_tokens;
  const std::int64_t max_seqs;
  std::ostream* const log;
  CalibratedProfile p;
  Dtype w = Dtype::fp32, kv = Dtype::fp32;  // the bench's (describe)
  std::int32_t rounds = 1;
  TimingPolicy round_policy;
  // The grid is walked twice by the same code: first to list the ops
  // (jobs), then, after the rounds, to fill the tables from the times
  // pooled per op.
  std::vector<Op> jobs;
  std::vector<std::vector<double>> pooled;
  bool filling = false;
  std::size_t next_job = 0;

  Calibration(const ModelDesc& model_, const CalibrateOptions& options_, Clock::time_point start)
      : model(model_),
        options(options_),
        wall_start(start),
        config(model_config_from(model_)),
        context(config.max_position_embeddings),
        max_tokens(std::min(context, options.max_tokens > 0 ? options.max_tokens : (options.quick ? 256 : 4096))),
        max_seqs(std::min<std::int64_t>(options.quick ? 32 : 256, max_tokens)),
        log(options.progress) {}

  std::unique_ptr<OpBench> open_bench() const {
    OpBenchOptions bo;
    bo.engine = options.engine;
    bo.max_tokens = max_tokens;
    bo.max_seqs = max_seqs;
    return std::make_unique<OpBench>(config, bo);
  }
  std::int32_t share(std::int32_t n) const { return std::max<std::int32_t>(1, (n + rounds - 1) / rounds); }
  std::int64_t elapsed_s() const {
    return static_cast<std::int64_t>(std::chrono::duration<double>(Clock::now() - wall_start).count());
  }

  void describe(const OpBench& bench);
  void set_rounds();
  void time_tables(OpBench& bench);
  TimingStats time_op(const Op& op);
  void walk_grid(const Grids& g);
  void time_rounds(OpBench& bench);
  EngineSettings engine_settings() const;
  void fit_steps(const EngineSettings& engine);
  void fit_idle(const EngineSettings& engine);
};

// The profile's metadata: what was calibrated, where and when.
void Calibration::describe(const OpBench& bench) {
  ProfileMetadata& meta = p.metadata;
  const DeviceInfo dev = bench.device_info();
  meta.model = model.name;
  meta.dtype = bench.weight_dtype_name() == "bf16" ? "bf16" : "fp32";
  meta.kv_dtype = bench.kv_dtype_name() == "bf16" ? "bf16" : bench.kv_dtype_name() == "fp8_e4m3" ? "fp8" : "fp32";
  meta.quantization = options.engine.quantization == "none" ? "" : options.engine.quantization;
  meta.backend = bench.backend_name();
  meta.device = dev.name;
  try {
    meta.hardware = hardware_for_device(meta.backend, dev.name);
  } catch (const UsageError&) {
    meta.hardware.clear();  // a device no bundled profile matches: recorded by its name only
  }
  meta.cpu_model = cpu_model_name();
  meta.hostname = host_name();
  meta.date = utc_now();
  meta.git_commit = kGitCommit;
  meta.twinserve_version = TWIN_VERSION;
  meta.threads = dev.threads;
  meta.tp = 1;
  meta.block_size = 16;
  meta.max_tokens = max_tokens;
  meta.quick = options.quick;
  w = parse_dtype(meta.dtype);
  kv = parse_dtype(meta.kv_dtype);
}

// Each round times every point with its share of the repeats.
void Calibration::set_rounds() {
  const TimingPolicy policy = timing_policy(options.quick);
  rounds = options.rounds;
  if (rounds < 1 || rounds > 100) {
    throw UsageError("calibrate: --rounds " + std::to_string(rounds) + ": expected 1 to 100");
  }
  round_policy = policy;
  round_policy.min_repeats = share(policy.min_repeats);
  round_policy.max_repeats = share(policy.max_repeats);
  round_policy.budget_ns = policy.budget_ns / rounds;
  p.metadata.repeats = round_policy.min_repeats * rounds;
  p.metadata.rounds = rounds;
}

// The points are timed in rounds over the whole grid and each point's
// repeats pooled: a burst of machine noise (a neighbour taking the memory
// bandwidth for a few seconds) then lands on a few repeats of many points
// instead of on every repeat of a few neighbouring points, where it bends
// a table.
void Calibration::time_tables(OpBench& bench) {
  const Grids g(model, max_tokens, max_seqs, context, options.quick);
  if (log) {
    *log << "calibrate: " << model.name << " (" << p.metadata.dtype << ") on " << p.metadata.device << ", "
         << g.points(context) << " points, tokens up to " << max_tokens << (options.quick ? " (quick)" : "") << ", "
         << rounds << (rounds == 1 ? " round" : " rounds") << "\n";
  }
  walk_grid(g);
  time_rounds(bench);
  p.gemm.clear();
  p.elementwise.clear();
  p.attention.clear();
  filling = true;
  walk_grid(g);
}

// Listing: records the op; filling: the op's pooled times, in the same order.
TimingStats Calibration::time_op(const Op& op) {
  if (!filling) {
    jobs.push_back(op);
    return {};
  }
  return timing_stats(pooled.at(next_job++));
}

void Calibration::walk_grid(const Grids& g) {
  auto curve = [&](OpKind kind, const std::vector<std::int64_t>& xs, bool per_seq) {
    CurveTable t;
    t.op = kind;
    for (std::int64_t x : xs) {
      // A prefill chunk samples once (its final_norm gathers one row).
      const Op op = op_of(model, per_seq ? many_seqs(x, 1, 0, true) : one_seq(x, 0, true), w, kv, kind);
      t.n = op.n;
      t.k = table_kind(kind) == TableKind::gemm ? op.k : 0;
      // Keyed as the lookup reads it: a GEMM by m, an elementwise op by its
      // rows (for MoE experts both are tokens x top_k, not tokens).
      const std::int64_t key = table_kind(kind) == TableKind::gemm ? op.m : op.tokens;
      t.points.push_back(point(static_cast<double>(key), op, time_op(op)));
    }
    (table_kind(kind) == TableKind::gemm ? p.gemm : p.elementwise).push_back(std::move(t));
  };
  for (OpKind kind : g.token_ops) curve(kind, g.tokens, false);
  for (OpKind kind : g.seq_ops) curve(kind, g.seqs, true);

  // Attention: rows by new tokens per seq (prefill) or batch (decode),
  // points by context per seq, where the shape fits.
  auto grid = [&](OpKind kind, const std::vector<std::int64_t>& rows, const std::vector<std::int64_t>& cols, auto fits,
                  auto shape) {
    GridTable t;
    t.op = kind;
    for (std::int64_t r : rows) {
      GridRow row;
      row.key = static_cast<double>(r);
      for (std::int64_t c : cols) {
        if (!fits(r, c)) continue;
        const Op op = op_of(model, shape(r, c), w, kv, kind);
        t.heads = op.n;
        t.head_dim = op.k;
        row.points.push_back(point(static_cast<double>(c), op, time_op(op)));
      }
      if (!row.points.empty()) t.rows.push_back(std::move(row));
    }
    return t;
  };
  GridTable prefill = grid(
      OpKind::attn_prefill, g.prefill_n, g.contexts, [&](std::int64_t n, std::int64_t c) { return n + c <= context; },
      [](std::int64_t n, std::int64_t c) { return one_seq(n, c, false); });
  GridTable decode = grid(
      OpKind::attn_decode, g.batches, g.decode_ctx, [&](std::int64_t b, std::int64_t c) { return b * c <= g.kv_cap; },
      [](std::int64_t b, std::int64_t c) { return many_seqs(b, 1, c, false); });
  p.attention.push_back(std::move(prefill));
  p.attention.push_back(std::move(decode));
}

// Times the listed ops, `rounds` passes over the whole list.
void Calibration::time_rounds(OpBench& bench) {
  pooled.assign(jobs.size(), {});
  for (std::int32_t r = 0; r < rounds; ++r) {
    const std::string phase = "round " + std::to_string(r + 1) + "/" + std::to_string(rounds);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (options.stop && options.stop()) {
        throw CalibrationStopped("calibration stopped in " + phase + " after " + std::to_string(i) + " of " +
                                 std::to_string(jobs.size()) + " points");
      }
      TimingStats t = bench.time(jobs[i], round_policy);
      pooled[i].insert(pooled[i].end(), t.samples_ns.begin(), t.samples_ns.end());
      if (options.on_progress) options.on_progress(phase, i + 1, jobs.size());
    }
    if (log) {
      *log << "calibrate: round " << r + 1 << " of " << rounds << ": " << jobs.size() << " points timed ("
           << elapsed_s() << " s)\n";
      log->flush();
    }
  }
}

// Whole steps through the engine's entry point, as `run` builds it.
EngineSettings Calibration::engine_settings() const {
  EngineSettings engine;
  engine.model_config = config;
  engine.runner = options.engine;
  engine.runner.block_size = static_cast<std::int32_t>(p.metadata.block_size);
  return engine;
}

// The step model (StepOverhead) from whole engine steps.
void Calibration::fit_steps(const EngineSettings& engine) {
  const std::vector<StepScenario> scenarios = step_scenarios(options.quick, context, share(5));
  // Most of a calibration's time: a line at each tenth of the runs (or the
  // caller's progress line).
  std::size_t shown_tenths = 0;
  const auto step_progress = [&](std::size_t done, std::size_t total) {
    if (options.stop && options.stop()) {
      throw CalibrationStopped("calibration stopped in the step scenarios after " + std::to_string(done) + " of " +
                               std::to_string(total) + " runs");
    }
    if (options.on_progress) {
      options.on_progress("steps", done, total);
      return;
    }
    if (!log || done * 10 < (shown_tenths + 1) * total) return;
    shown_tenths = done * 10 / total;
    *log << "calibrate: step scenarios " << done << "/" << total << " runs\n" << std::flush;
  };
  const std::vector<MeasuredStep> steps = measure_steps(engine, scenarios, rounds, step_progress);
  const CalibratedTables tables(p, "(calibration in progress)");
  p.overhead = fit_step_overhead(steps, tables, model, w, kv);
  if (log) log_step_fit(*log, p, steps.size());
}

// The warm-up after idleness, on a short prefill (what an arrival to an
// idle engine runs); gap 0 is the back-to-back baseline.
void Calibration::fit_idle(const EngineSettings& engine) {
  const std::vector<double> gaps = {0, 0.5e6, 2e6, 8e6, 32e6, 128e6, 512e6};
  const auto prompt = static_cast<std::int32_t>(std::min<std::int64_t>(32, context / 2));
  const IdleWarmup idle = measure_idle_warmup(engine, prompt, gaps, options.quick ? 3 : 7);
  p.overhead.idle_ns = idle.idle_ns;
  p.overhead.idle_tau_ns = idle.idle_tau_ns;
  p.overhead.idle_samples = idle.samples;
  if (log) {
    *log << "calibrate: after idle, a step pays up to " << idle.idle_ns / 1e3 << " us more (time constant "
         << idle.idle_tau_ns / 1e6 << " ms)\n";
  }
}

}  // namespace

CalibratedProfile calibrate(const ModelDesc& model, const CalibrateOptions& options) {
  const auto wall_start = Clock::now();
  check_tp(options);
  Calibration c(model, options, wall_start);
  {
    const std::unique_ptr<OpBench> bench = c.open_bench();
    c.describe(*bench);
    c.set_rounds();
    c.time_tables(*bench);
  }  // the bench's weights are freed before the runner loads its own
  const EngineSettings engine = c.engine_settings();
  c.fit_steps(engine);
  c.fit_idle(engine);
  c.p.metadata.seconds = std::chrono::duration<double>(Clock::now() - wall_start).count();
  return std::move(c.p);
}

}  // namespace twin
