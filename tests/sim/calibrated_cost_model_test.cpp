#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "hwprofiles/calibrated_lookup.hpp"
#include "hwprofiles/calibrated_profile.hpp"
#include "models/model_desc.hpp"
#include "models/quantization.hpp"
#include "sim/calibrated_cost_model.hpp"
#include "sim/cluster.hpp"
#include "sim/run.hpp"
#include "sim_test_util.hpp"
#include "tests/support/tiny_calibrated_profile.hpp"

using namespace twin;
using namespace twin::test;

namespace {

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("twin_calib_" + std::to_string(::getpid()) + "_" + name)).string()) {}
  ~TempFile() { std::remove(path.c_str()); }
};

std::string error_of(const nlohmann::json& j) {
  try {
    parse_calibrated_profile(j, "p.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("calibrated profile round trip is byte identical") {
  const CalibratedProfile p = tiny_profile();
  TempFile f("round.json");
  write_calibrated_profile(f.path, p);
  const CalibratedProfile back = load_calibrated_profile(f.path);
  CHECK(calibrated_profile_text(back) == calibrated_profile_text(p));
  CHECK(back.gemm.size() == p.gemm.size());
  CHECK(back.attention.at(1).rows.at(2).points.at(1).time_ns == p.attention.at(1).rows.at(2).points.at(1).time_ns);
}

TEST_CASE("calibrated profile parsing names the bad key") {
  const nlohmann::json good = nlohmann::json::parse(calibrated_profile_text(tiny_profile()));
  nlohmann::json j = good;
  j["metadata"]["colour"] = "blue";
  CHECK_THAT(error_of(j), Catch::Contains("p.json") && Catch::Contains("metadata.colour") && Catch::Contains("unknown key"));
  j = good;
  j["gemm"][0]["points"][3]["m"] = "four";
  CHECK_THAT(error_of(j), Catch::Contains("gemm[0].points[3].m") && Catch::Contains("expected a number"));
  j = good;
  j["metadata"]["threads"] = 1.5;
  CHECK_THAT(error_of(j), Catch::Contains("metadata.threads") && Catch::Contains("integer"));
  j = good;
  j["elementwise"][0]["points"][1]["time_ns"] = 0;
  CHECK_THAT(error_of(j), Catch::Contains("elementwise[0].points[1].time_ns") && Catch::Contains("positive"));
  j = good;
  j["gemm"][0]["points"][2]["m"] = 1;
  CHECK_THAT(error_of(j), Catch::Contains("ascend"));
  j = good;
  j["gemm"][0]["op"] = "rmsnorm";
  CHECK_THAT(error_of(j), Catch::Contains("gemm[0].op"));
  j = good;
  j["attention"][0].erase("rows");
  CHECK_THAT(error_of(j), Catch::Contains("attention[0].rows") && Catch::Contains("missing"));
  j = good;
  j["format"] = "something else";
  CHECK_THAT(error_of(j), Catch::Contains("format"));
  // A scale on the op tables is a fitted factor near 1: 1e-300 would price
  // every step at nothing, 1e300 at infinity.
  for (const double bad : {1e-300, 0.0, -1.0, 1e300}) {
    j = good;
    j["step_overhead"]["op_scale"] = bad;
    CHECK_THAT(error_of(j), Catch::Contains("p.json") && Catch::Contains("step_overhead.op_scale") &&
                                Catch::Contains("0.001 to 1000"));
    j = good;
    j["step_overhead"]["op_scales"]["qkv_proj"] = bad;
    CHECK_THAT(error_of(j), Catch::Contains("step_overhead.op_scales.qkv_proj") && Catch::Contains("0.001 to 1000"));
  }
  j = good;
  j["step_overhead"]["op_scale"] = 0.5;
  CHECK(error_of(j).empty());
  CHECK_THROWS_WITH(load_calibrated_profile("/nonexistent/profile.json"), Catch::Contains("/nonexistent/profile.json"));
  const std::string dir = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH(load_calibrated_profile(dir), Catch::Contains(dir) && Catch::Contains("got a directory"));
}

TEST_CASE("table lookups are exact at grid points and monotone between them") {
  const ModelDesc m = resolve_model("tiny");
  const CalibratedTables t(tiny_profile(), "p.json");
  for (int x : {1, 2, 4, 8, 16, 32, 64}) {
    const Op op = op_of(m, seqs(1, x, 0, false), OpKind::gate_up_proj);
    const OpLookup l = t.op_time(op);
    CHECK(l.time_ns == fake_time(op));
    CHECK_FALSE(l.out_of_range);
  }
  double last = 0;
  for (int x = 1; x <= 64; ++x) {
    const OpLookup l = t.op_time(op_of(m, seqs(1, x, 0, false), OpKind::qkv_proj));
    CHECK(l.time_ns >= last);
    CHECK_FALSE(l.out_of_range);
    last = l.time_ns;
  }
  // Attention grids: exact at points, monotone in context and in batch.
  const Op pre = op_of(m, seqs(1, 16, 64, false), OpKind::attn_prefill);
  CHECK(t.op_time(pre).time_ns == Approx(fake_time(pre)).epsilon(1e-12));
  const Op dec = op_of(m, seqs(4, 1, 64, false), OpKind::attn_decode);
  CHECK(t.op_time(dec).time_ns == Approx(fake_time(dec)).epsilon(1e-12));
  double prev = 0;
  for (int c = 16; c <= 256; c += 8) {
    const double v = t.op_time(op_of(m, seqs(6, 1, c, false), OpKind::attn_decode)).time_ns;
    CHECK(v >= prev);
    prev = v;
  }
  prev = 0;
  for (int n = 1; n <= 64; ++n) {
    const double v = t.op_time(op_of(m, seqs(1, n, 30, false), OpKind::attn_prefill)).time_ns;
    CHECK(v >= prev);
    prev = v;
  }
}

TEST_CASE("lookups beyond a table extrapolate along the roofline and are flagged") {
  const ModelDesc m = resolve_model("tiny");
  const CalibratedTables t(tiny_profile(), "p.json");
  const Op edge = op_of(m, seqs(1, 64, 0, false), OpKind::down_proj);
  const Op far = op_of(m, seqs(1, 256, 0, false), OpKind::down_proj);
  const OpLookup l = t.op_time(far);
  CHECK(l.out_of_range);
  const double roof_far = std::max(far.flops / t.flops_per_ns(), far.bytes / t.bytes_per_ns());
  const double roof_edge = std::max(edge.flops / t.flops_per_ns(), edge.bytes / t.bytes_per_ns());
  CHECK(l.time_ns == Approx(fake_time(edge) * roof_far / roof_edge));
  CHECK(l.time_ns > fake_time(edge));
  CHECK(t.op_time(op_of(m, seqs(32, 1, 64, false), OpKind::attn_decode)).out_of_range);
  CHECK(t.op_time(op_of(m, seqs(1, 8, 1000, false), OpKind::attn_prefill)).out_of_range);
}

TEST_CASE("calibrated step time is the sum of table lookups plus the overhead") {
  TempFile f("step.json");
  write_calibrated_profile(f.path, tiny_profile());
  ClusterConfig c = one_group("tiny", "cpu");
  c.groups[0].profile = f.path;
  c.groups[0].num_gpu_blocks_override = 256;
  Cluster cluster = build_cluster(c);
  CHECK(cluster.groups[0].dtype == Dtype::fp32);  // taken from the profile
  CostModel& model = *cluster.replicas[0].cost_model;
  const ModelDesc m = resolve_model("tiny");
  const CalibratedTables t(tiny_profile(), f.path);
  BatchShape mixed = seqs(3, 1, 40, true);
  mixed.seqs.push_back(SeqShape{20, 0, true});
  for (const BatchShape& shape : {seqs(1, 1, 16, true), seqs(8, 1, 100, true), seqs(1, 48, 0, true), mixed}) {
    std::vector<Op> ops;
    step_ops(m, shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, ops);
    double expected = 5000 + 100.0 * static_cast<double>(shape.seqs.size());
    for (const Op& op : ops) expected += t.op_time(op).time_ns * op.repeat;
    std::vector<OpCost> breakdown;
    const Time got = price(model, shape, &breakdown);
    CHECK(got == static_cast<Time>(std::llround(expected)));
    CHECK(breakdown.size() == ops.size());
  }
  auto* calibrated = dynamic_cast<CalibratedCostModel*>(&model);
  REQUIRE(calibrated != nullptr);
  const std::int64_t before = calibrated->out_of_range();
  price(model, seqs(1, 500, 0, true));
  CHECK(calibrated->out_of_range() > before);
}

TEST_CASE("the simulator charges each timed op's fixed cost once per step, as lookup_step does") {
  CalibratedProfile p = tiny_profile();
  for (std::size_t k = 0; k < p.overhead.op_fixed_ns.size(); ++k) p.overhead.op_fixed_ns[k] = 1000.0 * static_cast<double>(k + 1);
  TempFile f("fixed.json");
  write_calibrated_profile(f.path, p);
  ClusterConfig c = one_group("tiny", "cpu");
  c.groups[0].profile = f.path;
  c.groups[0].num_gpu_blocks_override = 256;
  Cluster cluster = build_cluster(c);
  CostModel& model = *cluster.replicas[0].cost_model;
  const ModelDesc m = resolve_model("tiny");
  const CalibratedTables with(p, f.path), without(tiny_profile(), f.path);
  BatchShape mixed = seqs(3, 1, 40, true);
  mixed.seqs.push_back(SeqShape{20, 0, true});
  for (const BatchShape& shape : {seqs(1, 1, 16, true), seqs(1, 48, 0, true), mixed}) {
    std::vector<Op> ops;
    step_ops(m, shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, ops);
    // Every timed op the step runs, once (its layers' repeats share it).
    double fixed = 0;
    std::vector<bool> charged(kNumTimedOps, false);
    for (const Op& op : ops) {
      const int k = timed_op_of(op.kind, false);
      if (k < 0 || charged[static_cast<std::size_t>(k)]) continue;
      charged[static_cast<std::size_t>(k)] = true;
      fixed += p.overhead.op_fixed_ns[static_cast<std::size_t>(k)];
    }
    REQUIRE(fixed > 0);
    std::vector<Op> scratch;
    const double bare = lookup_step(without, m, shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, scratch).total_ns();
    const double priced = lookup_step(with, m, shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, scratch).total_ns();
    CHECK(priced == Approx(bare + fixed));
    std::vector<OpCost> breakdown;
    CHECK(price(model, shape, &breakdown) == std::llround(priced));
    double sum = 0;
    for (const OpCost& op : breakdown) sum += op.time_ns;
    CHECK(sum == Approx(priced - (5000 + 100.0 * static_cast<double>(shape.seqs.size()))));
  }
}

TEST_CASE("op_scale multiplies the ops and the idle warm-up grows with the gap") {
  CalibratedProfile p = tiny_profile();
  p.overhead.op_scale = 1.25;
  p.overhead.idle_ns = 40'000;
  p.overhead.idle_tau_ns = 2e6;
  TempFile f("idle.json");
  write_calibrated_profile(f.path, p);
  ClusterConfig c = one_group("tiny", "cpu");
  c.groups[0].profile = f.path;
  c.groups[0].num_gpu_blocks_override = 256;
  Cluster cluster = build_cluster(c);
  CostModel& model = *cluster.replicas[0].cost_model;
  const ModelDesc m = resolve_model("tiny");
  const CalibratedTables t(p, f.path);
  const BatchShape shape = seqs(1, 24, 0, true);
  std::vector<Op> ops;
  step_ops(m, shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, ops);
  double sum = 0;
  for (const Op& op : ops) sum += t.op_time(op).time_ns * op.repeat;
  const double busy = 1.25 * sum + 5000 + 100;
  StepPlan plan;
  auto at_idle = [&](Time idle) {
    StepInput in{&plan, &shape, 0, 0};
    in.idle_ns = idle;
    return model.stage_time(in);
  };
  CHECK(at_idle(0) == std::llround(busy));
  CHECK(at_idle(2'000'000) == std::llround(busy + 40'000 * (1 - std::exp(-1.0))));
  CHECK(at_idle(10'000'000'000) == std::llround(busy + 40'000));
  // lookup_step (the profiler's and validate's view) agrees.
  std::vector<Op> scratch;
  const StepLookup l = lookup_step(t, m, shape, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, scratch, nullptr, 2e6);
  CHECK(std::llround(l.total_ns()) == at_idle(2'000'000));
}

TEST_CASE("a profile without op_scale, idle terms or rounds reads as scale 1, no warm-up, one round") {
  nlohmann::json j = nlohmann::json::parse(calibrated_profile_text(tiny_profile()));
  // As version 1 wrote it (before the per-kind scales).
  j["version"] = 1;
  for (const char* key : {"op_scales", "op_fixed_ns", "fit"}) j["step_overhead"].erase(key);
  for (auto& s : j["step_overhead"]["samples"])
    for (const char* key : {"in_situ_ns", "predicted_ns"}) s.erase(key);
  for (const char* key : {"op_scale", "idle_ns", "idle_tau_ns", "idle_samples"}) j["step_overhead"].erase(key);
  j["metadata"].erase("rounds");
  const CalibratedProfile p = parse_calibrated_profile(j, "old.json");
  CHECK(p.metadata.rounds == 1);
  CHECK(p.overhead.op_scale == 1);
  CHECK(p.overhead.idle_tau_ns == 0);
  const CalibratedTables t(p, "old.json");
  CHECK(t.overhead_ns(2, 1e9) == 5000 + 200);
  j["step_overhead"]["op_scale"] = 0;
  CHECK_THAT(error_of(j), Catch::Contains("step_overhead.op_scale") && Catch::Contains("0.001 to 1000"));
  j["step_overhead"]["op_scale"] = 1;
  j["step_overhead"]["idle_samples"] = nlohmann::json::array({{{"gap_ns", 1}, {"measured_ns", 2}}});
  CHECK_THAT(error_of(j), Catch::Contains("step_overhead.idle_samples[0].extra_ns") && Catch::Contains("missing"));
}

TEST_CASE("a profile for another model or dtype is an error naming both") {
  TempFile f("mismatch.json");
  write_calibrated_profile(f.path, tiny_profile());
  ClusterConfig c = one_group("small", "cpu");
  c.groups[0].profile = f.path;
  c.groups[0].num_gpu_blocks_override = 256;
  CHECK_THROWS_WITH(build_cluster(c), Catch::Contains("'tiny'") && Catch::Contains("'small'") && Catch::Contains(f.path));
  c = one_group("tiny", "cpu", 1, 1, 1, "bf16");
  c.groups[0].profile = f.path;
  c.groups[0].num_gpu_blocks_override = 256;
  CHECK_THROWS_WITH(build_cluster(c), Catch::Contains("fp32") && Catch::Contains("bf16"));
  c = one_group("tiny", "cpu", 2);
  c.groups[0].profile = f.path;
  c.groups[0].num_gpu_blocks_override = 256;
  CHECK_THROWS_WITH(build_cluster(c), Catch::Contains("CPU") && Catch::Contains("tp=2"));
  c = one_group("tiny", "cpu");
  c.groups[0].profile = f.path + ".missing";
  CHECK_THROWS_WITH(build_cluster(c), Catch::Contains(f.path + ".missing"));
}

TEST_CASE("a group with a profile takes its quantization, and another one is an error naming both") {
  TempFile plain("plain.json"), int8("int8.json");
  write_calibrated_profile(plain.path, tiny_profile());
  CalibratedProfile q = tiny_profile();
  q.metadata.quantization = "int8";
  write_calibrated_profile(int8.path, q);
  CHECK(load_calibrated_profile(int8.path).metadata.quantization == "int8");
  CHECK(load_calibrated_profile(plain.path).metadata.quantization.empty());
  auto group = [](const std::string& profile, const std::string& quantization) {
    ClusterConfig c = one_group("tiny", "cpu");
    c.groups[0].profile = profile;
    c.groups[0].quantization = quantization;
    c.groups[0].num_gpu_blocks_override = 256;
    return c;
  };
  // Unset: the profile's, int8 weight-only (its weights in the memory plan
  // are int8); the same given is accepted.
  CHECK(build_cluster(group(int8.path, "")).groups.front().precision.quant.method == QuantMethod::int8);
  CHECK(build_cluster(group(int8.path, "int8")).groups.front().precision.quantized());
  CHECK_FALSE(build_cluster(group(plain.path, "")).groups.front().precision.quantized());
  CHECK_THROWS_WITH(build_cluster(group(int8.path, "fp8")),
                    Catch::Contains(int8.path) && Catch::Contains("measured with quantization int8") &&
                        Catch::Contains("asks for fp8"));
  CHECK_THROWS_WITH(build_cluster(group(plain.path, "int8")),
                    Catch::Contains("measured with no quantization") && Catch::Contains("asks for int8"));
  // A name the simulator does not know is refused where the profile is read.
  nlohmann::json bad = nlohmann::json::parse(calibrated_profile_text(q));
  bad["metadata"]["quantization"] = "int3";
  CHECK_THAT(error_of(bad), Catch::Contains("metadata.quantization") && Catch::Contains("int3"));
}

TEST_CASE("a profile without a table the step needs names the op") {
  CalibratedProfile p = tiny_profile();
  p.elementwise.erase(p.elementwise.begin() + 1);  // rmsnorm
  const CalibratedTables t(p, "p.json");
  const ModelDesc m = resolve_model("tiny");
  CHECK_THROWS_WITH(t.op_time(op_of(m, seqs(1, 4, 0, false), OpKind::rmsnorm)),
                    Catch::Contains("'rmsnorm'") && Catch::Contains("p.json"));
}

TEST_CASE("cluster config takes a profile key and echoes it") {
  const nlohmann::json j = nlohmann::json::parse(R"({"groups": [{"model": "tiny", "profile": "x.json"}]})");
  const ClusterConfig c = parse_cluster_config(j, "c.json");
  CHECK(c.groups.at(0).profile == "x.json");
  CHECK(cluster_config_json(c)["groups"][0]["profile"] == "x.json");
  const nlohmann::json bad = nlohmann::json::parse(R"({"groups": [{"model": "tiny", "profile": 3}]})");
  CHECK_THROWS_WITH(parse_cluster_config(bad, "c.json"), Catch::Contains("profile"));
}

TEST_CASE("per-kind op scales round-trip, and version 1 profiles read with scale 1 or their op_scale") {
  CalibratedProfile p = tiny_profile();
  p.overhead.op_scales[static_cast<std::size_t>(OpKind::qkv_proj)] = 1.125;
  p.overhead.op_scales[static_cast<std::size_t>(OpKind::attn_prefill)] = 1.5;
  p.overhead.op_scales[static_cast<std::size_t>(OpKind::attn_decode)] = 1.5;
  p.overhead.fit = {12, 0.031, 0.08, 0.7, 0.5, 0.95, 0.88};
  p.overhead.samples[0].in_situ_ns = 3500;
  p.overhead.samples[0].predicted_ns = 8800;
  const std::string text = calibrated_profile_text(p);
  const nlohmann::json j = nlohmann::json::parse(text);
  CHECK(j["version"] == 2);
  CHECK(j["step_overhead"]["op_scales"]["qkv_proj"] == 1.125);
  CHECK_FALSE(j["step_overhead"]["op_scales"].contains("tp_allreduce"));  // kinds with a table only
  const CalibratedProfile back = parse_calibrated_profile(j, "p.json");
  CHECK(calibrated_profile_text(back) == text);
  CHECK(back.overhead.op_scales == p.overhead.op_scales);
  CHECK(back.overhead.fit.steps == 12);
  CHECK(back.overhead.fit.max_abs_error == 0.08);
  CHECK(back.overhead.samples[0].predicted_ns == 8800);

  // Version 1: no per-kind scales; its op_scale still multiplies every op.
  nlohmann::json v1 = j;
  v1["version"] = 1;
  for (const char* key : {"op_scales", "op_fixed_ns", "fit"}) v1["step_overhead"].erase(key);
  for (auto& s : v1["step_overhead"]["samples"])
    for (const char* key : {"in_situ_ns", "predicted_ns"}) s.erase(key);
  v1["step_overhead"]["op_scale"] = 1.25;
  const CalibratedProfile old = parse_calibrated_profile(v1, "v1.json");
  CHECK(old.overhead.op_scales == unit_op_scales());
  CHECK(old.overhead.fit.steps == 0);
  const CalibratedTables t(old, "v1.json");
  CHECK(t.op_scale(OpKind::qkv_proj) == 1.25);
  CHECK(t.op_scale(OpKind::attn_decode) == 1.25);
  // ... and version 2 writes what it read, with scales 1.
  CHECK(parse_calibrated_profile(nlohmann::json::parse(calibrated_profile_text(old)), "v2.json").overhead.op_scale == 1.25);

  // Strict both ways: a version 2 key in a version 1 file, a version 2 file
  // without them, a kind without a table, a scale <= 0, an unknown version.
  nlohmann::json bad = v1;
  bad["step_overhead"]["op_scales"] = nlohmann::json::object();
  CHECK_THAT(error_of(bad), Catch::Contains("step_overhead.op_scales") && Catch::Contains("unknown key"));
  bad = j;
  bad["step_overhead"].erase("op_scales");
  CHECK_THAT(error_of(bad), Catch::Contains("step_overhead.op_scales") && Catch::Contains("missing"));
  bad = j;
  bad["step_overhead"]["samples"][0].erase("in_situ_ns");
  CHECK_THAT(error_of(bad), Catch::Contains("step_overhead.samples[0].in_situ_ns") && Catch::Contains("missing"));
  bad = j;
  bad["step_overhead"]["op_scales"]["tp_allreduce"] = 1;
  CHECK_THAT(error_of(bad), Catch::Contains("step_overhead.op_scales.tp_allreduce") && Catch::Contains("no table"));
  bad = j;
  bad["step_overhead"]["op_scales"]["rmsnorm"] = 0;
  CHECK_THAT(error_of(bad), Catch::Contains("step_overhead.op_scales.rmsnorm") && Catch::Contains("0.001 to 1000"));
  bad = j;
  bad["step_overhead"]["fit"].erase("max_abs_error");
  CHECK_THAT(error_of(bad), Catch::Contains("step_overhead.fit.max_abs_error") && Catch::Contains("missing"));
  bad = j;
  bad["version"] = 3;
  CHECK_THAT(error_of(bad), Catch::Contains("version") && Catch::Contains("got 3"));
  // A kind left out of op_scales reads as 1.
  nlohmann::json some = j;
  some["step_overhead"]["op_scales"].erase("qkv_proj");
  CHECK(parse_calibrated_profile(some, "p.json").overhead.op_scales[static_cast<std::size_t>(OpKind::qkv_proj)] == 1);
}

TEST_CASE("a per-kind scale multiplies only its ops: scale 2 on attention doubles the attention part of a step") {
  const ModelDesc m = resolve_model("tiny");
  CalibratedProfile unit = tiny_profile();
  CalibratedProfile doubled = unit;
  doubled.overhead.op_scales[static_cast<std::size_t>(OpKind::attn_prefill)] = 2;
  doubled.overhead.op_scales[static_cast<std::size_t>(OpKind::attn_decode)] = 2;
  auto model_of = [&](const CalibratedProfile& p) {
    return CalibratedCostModel(std::make_shared<const CalibratedTables>(p, "p.json"), m, ParallelLayout{}, Dtype::fp32,
                               Dtype::fp32, 4096);
  };
  CalibratedCostModel a = model_of(unit), b = model_of(doubled);
  BatchShape mixed;
  mixed.seqs = {{1, 40, true}, {1, 100, true}, {30, 0, true}, {20, 16, false}};
  StepPlan plan;
  const StepInput in{&plan, &mixed, 0, 0};
  std::vector<OpCost> ops_a, ops_b;
  const Time ta = a.stage_time(in, &ops_a);
  const Time tb = b.stage_time(in, &ops_b);
  REQUIRE(ops_a.size() == ops_b.size());
  double attention = 0;
  for (std::size_t i = 0; i < ops_a.size(); ++i) {
    const bool attn = ops_a[i].kind == OpKind::attn_prefill || ops_a[i].kind == OpKind::attn_decode;
    CAPTURE(op_name(ops_a[i].kind));
    CHECK(ops_b[i].time_ns == (attn ? 2 * ops_a[i].time_ns : ops_a[i].time_ns));
    if (attn) attention += ops_a[i].time_ns;
  }
  REQUIRE(attention > 0);
  CHECK(static_cast<double>(tb - ta) == Approx(attention).margin(1.0));  // each total rounded to 1 ns
  // lookup_step (the profiler's and validate's view) applies the same scales.
  std::vector<Op> scratch;
  const StepLookup la = lookup_step(CalibratedTables(unit, "p.json"), m, mixed, ParallelLayout{}, Dtype::fp32,
                                    Dtype::fp32, 0, scratch);
  const StepLookup lb = lookup_step(CalibratedTables(doubled, "p.json"), m, mixed, ParallelLayout{}, Dtype::fp32,
                                    Dtype::fp32, 0, scratch);
  CHECK(la.ops_ns == lb.ops_ns);
  CHECK(lb.scaled_ops_ns - la.scaled_ops_ns == Approx(attention).epsilon(1e-12));
  CHECK(std::llround(lb.total_ns()) == tb);
}

TEST_CASE("summary.json's config echo names each group's cost model: roofline or calibrated") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("twin_echo_profile_" + std::to_string(::getpid()) + ".json")).string();
  write_calibrated_profile(path, tiny_profile());
  ClusterConfig config;
  config.groups.emplace_back();
  config.groups[0].model = "tiny";
  config.groups[0].hardware = "cpu";
  config.num_gpu_blocks_override = 64;
  const auto roofline = config_echo(config, build_cluster(config));
  CHECK(roofline["cost_model"] == "roofline");
  CHECK(roofline["resolved_groups"][0]["cost_model"] == "roofline");
  config.groups[0].profile = path;
  const auto calibrated = config_echo(config, build_cluster(config));
  CHECK(calibrated["cost_model"] == "calibrated");
  config.groups.push_back(config.groups[0]);
  config.groups[1].profile.clear();
  CHECK(config_echo(config, build_cluster(config))["cost_model"] == "mixed");
  std::filesystem::remove(path);
}
