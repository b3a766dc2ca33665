#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "engine/backend/backend.hpp"
#include "engine/profiler/calibrate.hpp"
#include "engine/profiler/op_timer.hpp"
#include "engine/profiler/step_overhead.hpp"
#include "engine/runtime/model_config.hpp"
#include "hwprofiles/calibrated_lookup.hpp"
#include "models/model_desc.hpp"
#include "tests/support/run_cli.hpp"

using namespace twin;

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() : path(std::filesystem::temp_directory_path() / ("twin_profiler_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

CalibratedProfile quick_tiny() {
  CalibrateOptions o;
  o.quick = true;
  return calibrate(resolve_model("tiny"), o);
}

}  // namespace

TEST_CASE("quantiles of repeats") {
  CHECK(quantile({3, 1, 2}, 0.5) == 2);
  CHECK(quantile({4, 1, 3, 2}, 0.5) == 2.5);
  CHECK(quantile({5}, 0.9) == 5);
}

TEST_CASE("a quick calibration of tiny covers every op its steps need") {
  const CalibratedProfile p = quick_tiny();
  CHECK(p.metadata.model == "tiny");
  CHECK(p.metadata.dtype == "fp32");
  CHECK(p.metadata.kv_dtype == "fp32");
  CHECK(p.metadata.backend == "cpu");
  CHECK(p.metadata.hardware == "cpu");  // the bundled hardware profile of the device
  CHECK(parse_calibrated_profile(nlohmann::json::parse(calibrated_profile_text(p)), "mem").metadata.hardware == "cpu");
  CHECK(p.metadata.threads >= 1);
  CHECK(p.metadata.quick);
  CHECK(p.metadata.rounds == 3);
  CHECK(p.metadata.repeats == 3);  // --quick's 3 repeats, one per round
  CHECK(p.gemm.size() == 5);
  CHECK(p.elementwise.size() == 6);
  REQUIRE(p.attention.size() == 2);
  for (const auto& t : p.gemm) {
    for (const auto& pt : t.points) {
      CHECK(pt.time_ns > 0);
      CHECK(pt.p10_ns <= pt.time_ns);
      CHECK(pt.time_ns <= pt.p90_ns);
    }
  }
  CHECK_FALSE(p.overhead.samples.empty());
  // The step model came from in-situ op times: per-kind scales, no global
  // factor, and fit figures over the steps (values not asserted: timing).
  CHECK(p.overhead.op_scale == 1);
  for (double v : p.overhead.op_scales) CHECK(v > 0);
  CHECK(p.overhead.fit.steps > 0);
  CHECK(p.overhead.fit.unscaled_ratio_min <= p.overhead.fit.unscaled_ratio_max);
  for (const OverheadSample& s : p.overhead.samples) {
    CHECK(s.in_situ_ns > 0);
    CHECK(s.predicted_ns > 0);
  }
  // Every op of a mixed step prices without a missing table.
  const CalibratedTables tables(p, "quick");
  BatchShape b;
  b.seqs = {{1, 40, true}, {1, 100, true}, {30, 0, true}, {20, 16, false}};
  std::vector<Op> scratch;
  const StepLookup l = lookup_step(tables, resolve_model("tiny"), b, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, scratch);
  CHECK(l.ops_ns > 0);
  CHECK(l.out_of_range == 0);
}

TEST_CASE("rounds pool every point's repeats and every scenario's steps, and the tables keep their shape") {
  CalibrateOptions o;
  o.quick = true;
  o.rounds = 1;
  const CalibratedProfile one = calibrate(resolve_model("tiny"), o);
  o.rounds = 2;
  const CalibratedProfile two = calibrate(resolve_model("tiny"), o);
  CHECK(one.metadata.rounds == 1);
  CHECK(one.metadata.repeats == 3);
  CHECK(two.metadata.rounds == 2);
  CHECK(two.metadata.repeats == 4);  // 3 repeats split over 2 rounds: 2 each
  REQUIRE(one.gemm.size() == two.gemm.size());
  for (std::size_t i = 0; i < one.gemm.size(); ++i) {
    CHECK(one.gemm[i].op == two.gemm[i].op);
    REQUIRE(one.gemm[i].points.size() == two.gemm[i].points.size());
    for (std::size_t j = 0; j < one.gemm[i].points.size(); ++j) {
      CHECK(one.gemm[i].points[j].x == two.gemm[i].points[j].x);
      CHECK(two.gemm[i].points[j].time_ns > 0);
    }
  }
  REQUIRE(one.attention.size() == two.attention.size());
  for (std::size_t i = 0; i < one.attention.size(); ++i) CHECK(one.attention[i].rows.size() == two.attention[i].rows.size());
  CHECK(one.overhead.samples.size() == two.overhead.samples.size());  // same groups, more steps in each
  o.rounds = 0;
  CHECK_THROWS_WITH(calibrate(resolve_model("tiny"), o), Catch::Contains("--rounds"));

  EngineSettings tiny;
  tiny.model = "tiny";
  const std::vector<StepScenario> scenarios = {{"decode x2", 2, 16, 5, 0, 0, 0}};
  CHECK(measure_steps(tiny, scenarios, 3).size() == 3 * measure_steps(tiny, scenarios, 1).size());
}

TEST_CASE("a quick profile prices every real engine step of decode and mixed scenarios") {
  // How close the prices come is a measurement (bench_calibrate_fit,
  // bench_validate), not a test: tiny's steps last microseconds on a shared
  // machine. What is deterministic: every step's ops have tables, and every
  // price is a positive, finite time.
  const CalibratedProfile p = quick_tiny();
  const CalibratedTables tables(p, "quick");
  const ModelDesc model = resolve_model("tiny");
  EngineSettings engine;
  engine.model = "tiny";
  const std::vector<StepScenario> scenarios = {{"decode x4", 4, 16, 12, 0, 0, 0}, {"mixed x2", 2, 16, 10, 2, 48, 3}};
  const std::vector<MeasuredStep> steps = measure_steps(engine, scenarios);
  REQUIRE(steps.size() > 10);
  std::vector<Op> scratch;
  for (const MeasuredStep& s : steps) {
    const StepLookup l = lookup_step(tables, model, s.shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, scratch);
    CHECK(std::isfinite(l.total_ns()));
    CHECK(l.total_ns() > 0);
    CHECK(s.measured_ns > 0);
  }
}

TEST_CASE("twinserve calibrate --quick writes a profile simulate --profile accepts") {
  TempDir dir;
  const std::string profile = dir.file("tiny.json");
  auto r = test::run_twinserve("calibrate --model tiny --quick --out '" + profile + "'", true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  REQUIRE(std::filesystem::exists(profile));
  CHECK_NOTHROW(load_calibrated_profile(profile));
  // Without --overwrite an existing profile is kept.
  r = test::run_twinserve("calibrate --model tiny --quick --out '" + profile + "'", true);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out, Catch::Contains(profile));

  const std::string trace = dir.file("trace.jsonl");
  {
    std::ofstream t(trace);
    for (int i = 0; i < 6; ++i)
      t << "{\"id\":" << i << ",\"arrival_s\":" << 0.01 * i << ",\"prompt_len\":" << 20 + 10 * i
        << ",\"output_len\":" << 8 << "}\n";
  }
  r = test::run_twinserve("simulate --trace '" + trace + "' --model tiny --hw cpu --num-gpu-blocks-override 64 --profile '" +
                              profile + "' --no-progress",
                          true);
  INFO(r.out);
  CHECK(r.exit_code == 0);

  // Bad input: a profile of another model, a missing profile, tp > 1 on the CPU.
  r = test::run_twinserve("simulate --trace '" + trace + "' --model small --hw cpu --num-gpu-blocks-override 64 --profile '" +
                              profile + "' --no-progress",
                          true);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.out, Catch::Contains(profile) && Catch::Contains("tiny") && Catch::Contains("small"));
  r = test::run_twinserve("simulate --trace '" + trace + "' --model tiny --hw cpu --profile '" + dir.file("none.json") +
                              "' --no-progress",
                          true);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.out, Catch::Contains(dir.file("none.json")));
  r = test::run_twinserve("calibrate --model tiny --quick --tp 2 --out '" + dir.file("tp2.json") + "'", true);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out, Catch::Contains("CPU"));
  r = test::run_twinserve("calibrate --model no-such-model --quick --out '" + dir.file("x.json") + "'", true);
  CHECK(r.exit_code == 2);
}

TEST_CASE("the step fit recovers a scale and an overhead, and keeps both terms non-negative") {
  // measured = 1.15 x ops + 5 us + 0.3 us per seq, exactly.
  std::vector<std::array<double, 3>> features;
  std::vector<double> measured;
  for (const auto& [ops, seqs] : std::vector<std::pair<double, double>>{
           {20e3, 1}, {60e3, 8}, {100e3, 32}, {150e3, 1}, {800e3, 1}, {1.5e6, 4}, {500e3, 12}}) {
    features.push_back({ops, 1, seqs});
    measured.push_back(1.15 * ops + 5e3 + 300 * seqs);
  }
  const StepFit fit = fit_step_terms(features, measured);
  CHECK(fit.op_scale == Approx(1.15).epsilon(1e-6));
  CHECK(fit.base_ns == Approx(5e3).epsilon(1e-4));
  CHECK(fit.per_seq_ns == Approx(300).epsilon(1e-4));
  // Steps that run faster than their ops and shrink with seqs: the fit may
  // not go negative on base or per_seq; the scale absorbs it.
  for (std::size_t i = 0; i < measured.size(); ++i) measured[i] = 0.9 * features[i][0] - 100 * features[i][2];
  const StepFit clamped = fit_step_terms(features, measured);
  CHECK(clamped.base_ns >= 0);
  CHECK(clamped.per_seq_ns >= 0);
  CHECK(clamped.op_scale > 0.8);
  CHECK(clamped.op_scale < 1.0);
  CHECK(fit_step_terms({}, {}).op_scale == 1);
}

TEST_CASE("the idle warm-up fit recovers an amplitude and a time constant") {
  std::vector<IdleSample> samples;
  for (double gap : {0.0, 0.5e6, 2e6, 8e6, 32e6, 128e6}) {
    const double extra = 300e3 * -std::expm1(-gap / 5e6);
    samples.push_back({gap, 1e6 + extra, extra});
  }
  const IdleWarmup fit = fit_idle_warmup(samples);
  CHECK(fit.idle_ns == Approx(300e3).epsilon(0.05));
  CHECK(fit.idle_tau_ns == Approx(5e6).epsilon(0.1));
  CHECK(fit.samples.size() == samples.size());
  // No warm-up (steps after idle are no slower): no term.
  for (IdleSample& s : samples) s.extra_ns = -0.01 * s.gap_ns;
  const IdleWarmup none = fit_idle_warmup(samples);
  CHECK(none.idle_tau_ns == 0);
  CHECK(none.idle_ns == 0);
}

TEST_CASE("a real engine step after idling is measured against the same step back to back") {
  EngineSettings tiny;
  tiny.model = "tiny";
  const IdleWarmup w = measure_idle_warmup(tiny, 16, {0, 1e6, 4e6}, 2);
  REQUIRE(w.samples.size() == 3);
  CHECK(w.samples[0].gap_ns == 0);
  CHECK(w.samples[0].extra_ns == 0);
  for (const IdleSample& s : w.samples) CHECK(s.measured_ns > 0);
  CHECK(w.idle_ns >= 0);
  CHECK_THROWS_WITH(measure_idle_warmup(tiny, 0, {0}, 1),
                    Catch::Contains("prompt"));
}

TEST_CASE("a mixture of experts is calibrated: router and expert GEMMs get tables the simulator reads") {
  TempDir dir;
  const std::string config = dir.file("config.json");
  std::ofstream(config) << R"({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
    "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "tie_word_embeddings": false, "num_local_experts": 4, "num_experts_per_tok": 2, "torch_dtype": "float32"})";
  const ModelDesc model = resolve_model(config);
  REQUIRE(model.is_moe());
  CalibrateOptions o;
  o.quick = true;
  o.engine.threads = 1;
  const CalibratedProfile p = calibrate(model, o);
  std::vector<OpKind> gemms;
  for (const CurveTable& t : p.gemm) gemms.push_back(t.op);
  for (OpKind k : {OpKind::moe_router, OpKind::moe_gate_up_proj, OpKind::moe_down_proj}) {
    INFO(op_name(k));
    CHECK(std::find(gemms.begin(), gemms.end(), k) != gemms.end());
  }
  CHECK(std::find(gemms.begin(), gemms.end(), OpKind::gate_up_proj) == gemms.end());
  // The expert GEMMs are keyed by their rows (tokens x top_k): one token's
  // step reads the table's 2-row point exactly.
  for (const CurveTable& t : p.gemm) {
    if (t.op == OpKind::moe_gate_up_proj) CHECK(t.points.front().x == 2);
  }
  // Every op of decode, prefill and mixed steps has a table.
  const CalibratedTables tables(p, "moe");
  std::vector<Op> scratch;
  BatchShape mixed;
  mixed.seqs = {{1, 40, true}, {1, 12, true}, {24, 0, true}};
  for (const BatchShape& shape : {mixed, BatchShape{{{64, 0, true}}}}) {
    const StepLookup l = lookup_step(tables, model, shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, scratch);
    CHECK(l.ops_ns > 0);
    // How far the fit scales the ops depends on the machine's load while
    // calibrating (a timing, not a property): only that the step is priced.
    CHECK(std::isfinite(l.total_ns()));
    CHECK(l.total_ns() > 0);
  }
}

namespace {

// Steps of three groups (decode, prefill, mixed), three steps each, whose
// in-situ op times are exactly `scales` x the table times and whose measured
// time adds base + per_seq x seqs. In each group one step runs in a slow
// spell (everything 1.4x): the groups' medians must ignore it.
std::vector<StepSample> synthetic_steps(const OpTimes& scales, double base, double per_seq, const OpTimes& fixed = {}) {
  std::vector<StepSample> out;
  const struct {
    const char* group;
    double seqs, tokens, scale_tokens;
  } groups[] = {{"decode x8 decode", 8, 8, 1}, {"prefill prefill", 1, 256, 20}, {"mixed x4 mixed", 5, 52, 6}};
  for (const auto& g : groups) {
    for (int i = 0; i < 3; ++i) {
      StepSample s;
      s.group = g.group;
      s.num_seqs = g.seqs;
      s.new_tokens = g.tokens;
      double in_situ = 0;
      for (int k = 0; k < kNumTimedOps; ++k) {
        const auto op = static_cast<TimedOp>(k);
        if (op == TimedOp::moe_router || op == TimedOp::moe_experts) continue;  // a dense model
        // Kinds differ in how they grow with the tokens, so the groups are
        // not proportional to one another.
        const double t = (1000.0 + 37.0 * k) * (op == TimedOp::attention ? g.scale_tokens * g.scale_tokens
                                                                           : g.scale_tokens + 0.1 * k);
        s.table_ns[k] = t;
        s.in_situ_ns[k] = scales[k] * t + fixed[k];
        in_situ += s.in_situ_ns[k];
      }
      s.measured_ns = in_situ + base + per_seq * g.seqs;
      if (i == 1) {
        for (double& v : s.in_situ_ns) v *= 1.4;
        s.measured_ns *= 1.4;
      }
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the per-kind fit recovers each op kind's scale and the step terms from synthetic steps") {
  OpTimes scales;
  scales.fill(1.0);
  scales[static_cast<int>(TimedOp::qkv_proj)] = 1.12;
  scales[static_cast<int>(TimedOp::gate_up_proj)] = 1.05;
  scales[static_cast<int>(TimedOp::down_proj)] = 1.27;
  scales[static_cast<int>(TimedOp::rmsnorm)] = 1.6;
  scales[static_cast<int>(TimedOp::rotary)] = 1.45;
  scales[static_cast<int>(TimedOp::embed)] = 1.7;
  scales[static_cast<int>(TimedOp::attention)] = 1.2;
  scales[static_cast<int>(TimedOp::sample)] = 0.9;
  const std::vector<StepSample> steps = synthetic_steps(scales, 5e3, 300);
  const OpScaleFit fit = fit_op_scales(steps);
  CHECK(fit.per_kind);
  CHECK(fit.op_scale == 1);
  for (int k = 0; k < kNumTimedOps; ++k) {
    CAPTURE(kTimedOpNames[static_cast<std::size_t>(k)]);
    CHECK(fit.scales[k] == Approx(scales[k]).epsilon(1e-9));  // moe ops: never timed, 1
  }
  CHECK(fit.base_ns == Approx(5e3).epsilon(1e-6));
  CHECK(fit.per_seq_ns == Approx(300).epsilon(1e-6));
  REQUIRE(fit.samples.size() == 3);
  CHECK(fit.samples[0].label == "decode x8 decode");  // groups in first-seen order
  for (const OverheadSample& s : fit.samples) CHECK(s.predicted_ns == Approx(s.measured_ns).epsilon(1e-9));
  // Quality over every step: exact on the six normal steps, 1 - 1/1.4 off
  // (the slow spell) on the other three.
  CHECK(fit.quality.steps == 9);
  const double slow = 1 - 1 / 1.4;
  CHECK(fit.quality.max_abs_error == Approx(slow).epsilon(1e-6));
  CHECK(fit.quality.mean_abs_error == Approx(slow / 3).epsilon(1e-6));
  CHECK(fit.quality.unscaled_ratio_min > 0);
  CHECK(fit.quality.unscaled_ratio_min <= fit.quality.unscaled_ratio_mean);
  CHECK(fit.quality.unscaled_ratio_mean <= fit.quality.unscaled_ratio_max);
  CHECK(fit.quality.in_situ_ratio_mean < 1);  // base and per_seq are outside the ops
  // Same input, same output.
  const OpScaleFit again = fit_op_scales(steps);
  CHECK(again.scales == fit.scales);
  CHECK(again.base_ns == fit.base_ns);

  // Steps faster than their scaled ops: the terms stay >= 0.
  std::vector<StepSample> fast = steps;
  for (StepSample& s : fast) s.measured_ns = 0.8 * s.measured_ns;
  const OpScaleFit clamped = fit_op_scales(fast);
  CHECK(clamped.base_ns >= 0);
  CHECK(clamped.per_seq_ns >= 0);

  // Without in-situ times: the single-scale fit of version 1, scales 1.
  std::vector<StepSample> untimed = steps;
  for (StepSample& s : untimed) s.in_situ_ns.fill(0.0);
  const OpScaleFit global = fit_op_scales(untimed);
  CHECK_FALSE(global.per_kind);
  for (double v : global.scales) CHECK(v == 1);
  CHECK(global.op_scale > 0);
  CHECK(fit_op_scales({}).quality.steps == 0);
}

TEST_CASE("a fixed cost per step of an op kind is fitted apart from its scale") {
  // In-situ = scale x table + a fixed cost (a thread pool's dispatch, a
  // launch gap): a scale alone would stretch to the small groups.
  OpTimes scales, fixed{};
  scales.fill(1.0);
  scales[static_cast<int>(TimedOp::rmsnorm)] = 1.3;
  scales[static_cast<int>(TimedOp::qkv_proj)] = 1.1;
  fixed[static_cast<int>(TimedOp::rmsnorm)] = 40e3;
  fixed[static_cast<int>(TimedOp::rotary)] = 15e3;
  const OpScaleFit fit = fit_op_scales(synthetic_steps(scales, 5e3, 300, fixed));
  for (int k = 0; k < kNumTimedOps; ++k) {
    CAPTURE(kTimedOpNames[static_cast<std::size_t>(k)]);
    CHECK(fit.scales[k] == Approx(scales[k]).epsilon(1e-6));
    CHECK(fit.fixed[k] == Approx(fixed[k]).margin(1e-3));
  }
  CHECK(fit.base_ns == Approx(5e3).epsilon(1e-6));
  CHECK(fit.per_seq_ns == Approx(300).epsilon(1e-6));
  for (const OverheadSample& x : fit.samples) CHECK(x.predicted_ns == Approx(x.measured_ns).epsilon(1e-9));
}

TEST_CASE("op kinds map to the runner's timed ops, and fit_step_overhead gives every kind of one its scale") {
  CHECK(timed_op_of(OpKind::attn_prefill, false) == static_cast<int>(TimedOp::attention));
  CHECK(timed_op_of(OpKind::attn_decode, false) == static_cast<int>(TimedOp::attention));
  CHECK(timed_op_of(OpKind::silu_mul, false) == static_cast<int>(TimedOp::silu_mul));
  CHECK(timed_op_of(OpKind::silu_mul, true) == static_cast<int>(TimedOp::moe_experts));
  CHECK(timed_op_of(OpKind::moe_down_proj, true) == static_cast<int>(TimedOp::moe_experts));
  CHECK(timed_op_of(OpKind::tp_allreduce, false) == -1);
  for (int k = 0; k < kNumOpKinds; ++k) {
    const auto kind = static_cast<OpKind>(k);
    CAPTURE(op_name(kind));
    CHECK((timed_op_of(kind, false) >= 0 || timed_op_of(kind, true) >= 0) == (table_kind(kind) != TableKind::none));
  }

  // Real tables (a quick tiny calibration) with made-up in-situ times:
  // attention 1.5x its table, everything else as the table says.
  const CalibratedProfile p = quick_tiny();
  const CalibratedTables tables(p, "quick");
  const ModelDesc model = resolve_model("tiny");
  std::vector<MeasuredStep> steps;
  std::vector<Op> ops;
  for (const auto& [label, shape] : std::vector<std::pair<std::string, BatchShape>>{
           {"decode", BatchShape{{{1, 40, true}, {1, 12, true}}}},
           {"prefill", BatchShape{{{48, 0, true}}}},
           {"mixed", BatchShape{{{1, 40, true}, {24, 0, true}}}}}) {
    MeasuredStep m;
    m.label = label;
    m.shape = shape;
    ops.clear();
    step_ops(model, shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, ops);
    for (const Op& op : ops) {
      const int k = timed_op_of(op.kind, false);
      REQUIRE(k >= 0);
      m.op_ns[k] += tables.op_time(op).time_ns * op.repeat * (k == static_cast<int>(TimedOp::attention) ? 1.5 : 1.0);
    }
    double in_situ = 0;
    for (double v : m.op_ns) in_situ += v;
    m.measured_ns = in_situ + 20e3;
    steps.push_back(m);
  }
  const StepOverhead o = fit_step_overhead(steps, tables, model, Dtype::fp32, Dtype::fp32);
  CHECK(o.op_scale == 1);
  CHECK(o.op_scales[static_cast<int>(OpKind::attn_prefill)] == Approx(1.5).epsilon(1e-9));
  CHECK(o.op_scales[static_cast<int>(OpKind::attn_decode)] == Approx(1.5).epsilon(1e-9));
  CHECK(o.op_scales[static_cast<int>(OpKind::qkv_proj)] == Approx(1.0).epsilon(1e-9));
  CHECK(o.op_scales[static_cast<int>(OpKind::tp_allreduce)] == 1);
  CHECK(o.base_ns == Approx(20e3).epsilon(1e-6));
  CHECK(o.per_seq_ns == Approx(0).margin(1e-6));
  CHECK(o.fit.max_abs_error < 1e-9);
  // The cost model with this step model prices the steps as measured.
  CalibratedProfile q = p;
  q.overhead = o;
  const CalibratedTables scaled(q, "scaled");
  std::vector<Op> scratch;
  for (const MeasuredStep& m : steps) {
    const StepLookup l = lookup_step(scaled, model, m.shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, scratch);
    CHECK(l.total_ns() == Approx(m.measured_ns).epsilon(1e-9));
  }
}

TEST_CASE("the CPU backend's op timing marks: from mark 0, non-decreasing, strict about marks") {
  auto backend = make_backend("cpu", {1});
  backend->begin_op_timing(3);
  backend->mark_op(0);
  backend->mark_op(1);
  backend->mark_op(2);
  std::vector<double> ns(3, -1.0);
  backend->read_op_marks(ns);
  CHECK(ns[0] == 0);
  CHECK(ns[1] >= ns[0]);
  CHECK(ns[2] >= ns[1]);
  CHECK_THROWS_WITH(backend->mark_op(3), Catch::Contains("mark 3"));
  backend->begin_op_timing(2);
  backend->mark_op(0);
  std::vector<double> two(2);
  CHECK_THROWS_WITH(backend->read_op_marks(two), Catch::Contains("mark 1") && Catch::Contains("not recorded"));
  std::vector<double> one(1, -1.0);
  backend->read_op_marks(one);
  CHECK(one[0] == 0);
}

TEST_CASE("calibration steps carry in-situ op times for every op the runner runs") {
  EngineSettings tiny;
  tiny.model = "tiny";
  const std::vector<StepScenario> scenarios = {{"mixed x2", 2, 16, 6, 2, 24, 2}};
  const std::vector<MeasuredStep> steps = measure_steps(tiny, scenarios);
  REQUIRE_FALSE(steps.empty());
  for (const MeasuredStep& s : steps) {
    double sum = 0;
    for (int k = 0; k < kNumTimedOps; ++k) {
      const auto op = static_cast<TimedOp>(k);
      CAPTURE(kTimedOpNames[static_cast<std::size_t>(k)]);
      CHECK(s.op_ns[k] >= 0);
      if (op == TimedOp::moe_router || op == TimedOp::moe_experts) CHECK(s.op_ns[k] == 0);
      sum += s.op_ns[k];
    }
    CHECK(sum > 0);
    CHECK(sum <= s.measured_ns);  // the ops run inside the step
  }
}
