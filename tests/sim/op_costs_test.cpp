// Roofline op prices against measured kernel times: Vidur's (A100 and H100,
// Llama-2-7B and 70B under TP, tests/sim/data/vidur_op_times.csv) and our
// H200's (Llama-3.1-8B, tests/sim/data/h200_op_times.csv), both made by
// tools/fit-curves.py. Prints the figure tables of docs/op-costs.md.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "hwprofiles/hardware_desc.hpp"
#include "models/model_desc.hpp"
#include "models/step_ops.hpp"
#include "sim/roofline_cost_model.hpp"

using namespace twin;

namespace {

struct Row {
  std::string gpu, model, op, source;
  int tp = 1, batch = 1;
  std::int64_t tokens = 0, context = 0;
  double measured_ms = 0;
};

std::vector<Row> read_rows(const std::string& table) {
  std::ifstream in(std::string(TWIN_SOURCE_DIR) + "/tests/sim/data/" + table);
  REQUIRE(in.good());
  std::vector<Row> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    REQUIRE(f.size() == 9);
    Row r;
    r.gpu = f[0];
    r.model = f[1];
    r.tp = std::stoi(f[2]);
    r.op = f[3];
    r.batch = std::stoi(f[4]);
    r.tokens = std::stoll(f[5]);
    r.context = std::stoll(f[6]);
    r.measured_ms = std::stod(f[7]);
    r.source = f[8];
    rows.push_back(r);
  }
  return rows;
}

// Our price of one instance of the row's op, and the curve that set it.
struct Priced {
  double ms = 0;
  std::string curve;
};

Priced price_row(const Row& r) {
  const HardwareDesc hw = resolve_hardware(r.gpu);
  const ModelDesc model = resolve_model(r.model);
  RooflineCostModel cost(model, ParallelLayout{r.tp, 1}, Dtype::fp16, Dtype::fp16, roofline_params(hw, Dtype::fp16));
  BatchShape shape;
  for (int i = 0; i < r.batch; ++i) shape.seqs.push_back(SeqShape{r.tokens, r.context, true});
  std::vector<Op> ops;
  step_ops(model, shape, ParallelLayout{r.tp, 1}, Dtype::fp16, Dtype::fp16, 0, ops);
  for (const Op& op : ops) {
    if (op_name(op.kind) != r.op) continue;
    const OpCost c = cost.price(op, 0);
    return {c.time_ns / c.repeat / 1e6, std::string(c.curve)};
  }
  FAIL("no op " << r.op << " in the step");
  return {};
}

// Vidur's times are kernel times in whole microseconds: below 1 us apart,
// a relative error says nothing.
bool close_enough(double ours_ms, double measured_ms) {
  return std::fabs(ours_ms / measured_ms - 1) <= 0.15 || std::fabs(ours_ms - measured_ms) <= 0.001;
}

// Points of each (gpu, op) still further off than that, as docs/op-costs.md
// lists them. The test fails if a family misses more (a curve got worse);
// lower these when the curves get better.
const std::map<std::string, int> kKnownMisses = {
    {"a100-80gb attn_decode", 8}, {"a100-80gb attn_prefill", 4}, {"a100-80gb down_proj", 0},
    {"a100-80gb gate_up_proj", 0}, {"a100-80gb o_proj", 1},       {"a100-80gb qkv_proj", 6},
    {"a100-80gb rmsnorm", 2},      {"a100-80gb rotary", 2},        {"a100-80gb silu_mul", 14},
    {"h100-80gb down_proj", 9},    {"h100-80gb gate_up_proj", 3},  {"h100-80gb o_proj", 3},
    {"h100-80gb qkv_proj", 3},     {"h100-80gb rmsnorm", 1},       {"h100-80gb rotary", 2},
    {"h100-80gb silu_mul", 7},
};
// 682 of 747 points (611 before tokens axes, per-op GEMM and two-row
// prefill curves; 689 before the elementwise and attention curves were
// held to times that grow with the work: the 7 they gave up were fitted by
// efficiency spikes that priced bigger ops below smaller ones).
constexpr int kKnownWithin = 682;
// The H200's: o_proj at 47 rows ran a narrower tile than at 32 and took
// 12.5 us where 32 rows took 15.9 (a curve by bytes cannot have both).
const std::map<std::string, int> kKnownH200Misses = {{"h200 o_proj", 1}};

// LLMServingSim's table: the points still further off after the curves
// were fitted. The prefill attention's curve is by FLOPs over three models
// (32 and 64 heads), so Llama's short chunks run faster than it says;
// o_proj at 256-512 rows runs a slower tile on Ada.
const std::map<std::string, int> kKnownLssMisses = {
    {"rtx-4090 o_proj", 2},
    {"rtx-4090 attn_prefill", 1},
    {"rtx-pro-6000-blackwell-server qkv_proj", 1},
    {"rtx-pro-6000-blackwell-server attn_prefill", 2},
};
constexpr int kKnownLssWithin = 74;  // of 80

// Prices every row of a table, prints the per-family figures and checks
// them against the misses allowed; returns the points within.
int check_table(const std::vector<Row>& rows, const std::map<std::string, int>& known_misses) {
  std::map<std::string, std::vector<double>> errors;
  std::map<std::string, int> misses;
  std::map<std::string, std::string> curves;
  for (const Row& r : rows) {
    const Priced p = price_row(r);
    const std::string key = r.gpu + " " + r.op;
    errors[key].push_back(std::fabs(p.ms / r.measured_ms - 1));
    curves[key] = p.curve;  // the curve of the largest point's binding roof
    if (!close_enough(p.ms, r.measured_ms)) {
      ++misses[key];
      std::printf("miss %s %s tp%d batch %d tokens %lld context %lld: ours %.4f ms, measured %.4f ms\n", r.gpu.c_str(),
                  r.op.c_str(), r.tp, r.batch, static_cast<long long>(r.tokens), static_cast<long long>(r.context),
                  p.ms, r.measured_ms);
    }
  }
  std::printf("| GPU | op | points | median error | max error | within 15%% or 1 us | curve (largest point) |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (auto& [key, e] : errors) {
    std::sort(e.begin(), e.end());
    const auto space = key.find(' ');
    const int n = static_cast<int>(e.size());
    std::printf("| %s | %s | %d | %.1f%% | %.1f%% | %d | %s |\n", key.substr(0, space).c_str(), key.substr(space + 1).c_str(),
                n, 100 * e[e.size() / 2], 100 * e.back(), n - misses[key], curves[key].c_str());
  }
  int within = 0;
  for (auto& [key, e] : errors) within += static_cast<int>(e.size()) - misses[key];
  std::printf("within 15%% or 1 us: %d of %zu points\n", within, rows.size());
  for (auto& [key, e] : errors) {
    INFO(key << ": " << misses[key] << " of " << e.size() << " points off by more than 15% and 1 us");
    CHECK(e[e.size() / 2] <= 0.15);  // the median point of every family
    const auto known = known_misses.find(key);
    CHECK(misses[key] <= (known == known_misses.end() ? 0 : known->second));
  }
  return within;
}

}  // namespace

TEST_CASE("roofline op prices against Vidur's measured A100 and H100 kernels", "[op-costs]") {
  const std::vector<Row> rows = read_rows("vidur_op_times.csv");
  REQUIRE(rows.size() > 500);
  CHECK(check_table(rows, kKnownMisses) >= kKnownWithin);
}

TEST_CASE("roofline op prices against vLLM's kernels on an RTX 4090 and an RTX PRO 6000", "[op-costs]") {
  // LLMServingSim's published timings of vLLM 0.19's kernels (tools/
  // fit-lss-curves.py): the GEMM and both attention curves of both
  // profiles were fitted to them, over three models; the memory-bound
  // GEMMs were not.
  const std::vector<Row> rows = read_rows("lss_op_times.csv");
  REQUIRE(rows.size() >= 70);
  CHECK(check_table(rows, kKnownLssMisses) >= kKnownLssWithin);
}

TEST_CASE("roofline op prices against our H200's measured kernels", "[op-costs]") {
  // The points the H200's curves were fitted to: cuBLAS GEMMs and SDPA
  // attention of Llama-3.1-8B.
  const std::vector<Row> rows = read_rows("h200_op_times.csv");
  REQUIRE(rows.size() >= 30);
  CHECK(check_table(rows, kKnownH200Misses) >= static_cast<int>(rows.size()) - 1);

  // Figures measured with PyTorch on the same H200 (tools/gpu-anchors.py,
  // 2026-12-01): the LM head at 4,096 rows ran at 700 TFLOP/s and a batch-1
  // decode step's GEMVs (every layer's and the LM head's, with the
  // SiLU-and-multiply between them) took 3.93 ms in a CUDA graph, neither
  // in the table; one layer's four GEMMs at 4,096 tokens ran at 768 TFLOP/s
  // together (the table's 4,096-row points are the 2026-12-04 sweep's).
  auto priced = [](const std::string& op, int batch, std::int64_t tokens) {
    Row r;
    r.gpu = "h200";
    r.model = "llama-3.1-8b";
    r.op = op;
    r.batch = batch;
    r.tokens = tokens;
    return price_row(r).ms;
  };
  const double layer_ms = priced("qkv_proj", 1, 4096) + priced("o_proj", 1, 4096) + priced("gate_up_proj", 1, 4096) +
                          priced("down_proj", 1, 4096);
  const double layer_flops = 2.0 * 4096 * 4096 * (6144 + 4096 + 2 * 14336 + 14336);
  const double layer_tflops = layer_flops / (layer_ms * 1e-3) / 1e12;
  const double head_tflops = 2.0 * 4096 * 4096 * 128256 / (priced("lm_head", 4096, 1) * 1e-3) / 1e12;
  const double decode_ms = 32 * (priced("qkv_proj", 1, 1) + priced("o_proj", 1, 1) + priced("gate_up_proj", 1, 1) +
                                 priced("down_proj", 1, 1)) +
                           priced("lm_head", 1, 1);
  std::printf("H200 out of sample: layer GEMMs at 4096 tokens %.0f TFLOP/s (PyTorch 768), LM head %.0f (700), "
              "batch-1 decode GEMVs %.2f ms (3.93 with the SiLU between them)\n",
              layer_tflops, head_tflops, decode_ms);
  CHECK(layer_tflops == Approx(768).epsilon(0.15));
  CHECK(head_tflops == Approx(700).epsilon(0.15));
  CHECK(decode_ms == Approx(3.93).epsilon(0.15));
}

TEST_CASE("named efficiency curves price the ops they list and the explain names them") {
  const HardwareDesc hw = resolve_hardware("a100-80gb");
  RooflineParams p = roofline_params(hw, Dtype::fp16);
  const ModelDesc model = resolve_model("llama-2-7b");
  RooflineCostModel cost(model, ParallelLayout{1, 1}, Dtype::fp16, Dtype::fp16, p);
  BatchShape one;
  one.seqs.push_back(SeqShape{1, 1000, true});
  std::vector<Op> ops;
  step_ops(model, one, ParallelLayout{1, 1}, Dtype::fp16, Dtype::fp16, 0, ops);
  for (const Op& op : ops) {
    const OpCost c = cost.price(op, 0);
    if (op.kind == OpKind::qkv_proj) {
      CHECK_FALSE(c.compute_bound);  // one token: the weights' bytes
      CHECK(c.curve == "gemm_qkv_proj_memory");
      CHECK(c.efficiency > 0.5);
    }
    if (op.kind == OpKind::attn_decode) CHECK(c.curve == "attn_decode");
    if (op.kind == OpKind::embed) CHECK(c.curve == "memory");  // no curve lists it: the constant
  }
  // Elementwise kernels run on the CUDA cores: their FLOPs never make them
  // compute-bound on the tensor-core GEMM curve (64 decodes: a norm of 64 rows).
  BatchShape many;
  for (int i = 0; i < 64; ++i) many.seqs.push_back(SeqShape{1, 1024, true});
  ops.clear();
  step_ops(model, many, ParallelLayout{1, 1}, Dtype::fp16, Dtype::fp16, 0, ops);
  for (const Op& op : ops) {
    if (op.kind != OpKind::rmsnorm && op.kind != OpKind::rotary && op.kind != OpKind::silu_mul) continue;
    const OpCost c = cost.price(op, 0);
    CHECK_FALSE(c.compute_bound);
    CHECK(c.curve == std::string(op_name(op.kind) == "rmsnorm" ? "norm" : op_name(op.kind)));
  }
  // A profile without named curves prices as before: the cpu profile.
  const RooflineParams cpu = roofline_params(resolve_hardware("cpu"), Dtype::fp32);
  CHECK(cpu.curves.empty());
  for (auto index : cpu.compute_curve) CHECK(index == -1);
}

TEST_CASE("a curve by tokens and a curve with rows by context share") {
  const HardwareDesc hw = resolve_hardware("a100-80gb");
  const RooflineParams p = roofline_params(hw, Dtype::fp16);
  const ModelDesc model = resolve_model("llama-2-7b");
  RooflineCostModel cost(model, ParallelLayout{1, 1}, Dtype::fp16, Dtype::fp16, p);
  auto op_of = [&](OpKind kind, std::int64_t tokens, std::int64_t context) {
    BatchShape b;
    b.seqs.push_back(SeqShape{tokens, context, true});
    std::vector<Op> ops;
    step_ops(model, b, ParallelLayout{1, 1}, Dtype::fp16, Dtype::fp16, 0, ops);
    for (const Op& op : ops)
      if (op.kind == kind) return op;
    FAIL("no such op");
    return Op{};
  };
  // The norm's curve is by tokens: the same rows at twice the width keep
  // the efficiency (a wider row takes its block twice as long).
  Op norm = op_of(OpKind::rmsnorm, 64, 0);
  const double narrow = cost.price(norm, 0).efficiency;
  norm.bytes *= 2;
  CHECK(cost.price(norm, 0).efficiency == Approx(narrow));
  // Prefill after cached context runs at the context row's rate, a fresh
  // prompt of the same FLOPs at the fresh row's; a mix between them.
  Op fresh = op_of(OpKind::attn_prefill, 2048, 0);
  Op chunk = fresh;
  chunk.context = 4096;
  const OpCost f = cost.price(fresh, 0), c = cost.price(chunk, 0);
  CHECK(f.curve == "attn_prefill");
  CHECK(c.efficiency > 1.5 * f.efficiency);
  Op mixed = fresh;
  mixed.context = 512;
  const double m = cost.price(mixed, 0).efficiency;
  CHECK(m > f.efficiency);
  CHECK(m < c.efficiency);
  // Same op, same price: the memo of (curve, x, y) answers as the curve does.
  CHECK(cost.price(mixed, 0).time_ns == cost.price(mixed, 0).time_ns);
}

TEST_CASE("a layer's linear and elementwise kernels summed, against Vidur's", "[op-costs]") {
  // What a step's price is made of: per layer, the four GEMMs, two fused
  // add+norms, SiLU-and-multiply and rotary. Single ops miss where cuBLAS's
  // tile choice or whole-microsecond timers step (above); their sum per
  // layer is the figure a step time carries.
  const std::vector<Row> rows = read_rows("vidur_op_times.csv");
  const std::map<std::string, int> per_layer = {{"qkv_proj", 1}, {"o_proj", 1},  {"gate_up_proj", 1}, {"down_proj", 1},
                                                {"rmsnorm", 2},  {"silu_mul", 1}, {"rotary", 1}};
  struct Sum {
    double ours = 0, measured = 0;
    int ops = 0;
  };
  std::map<std::string, Sum> layers;  // "gpu model tpN tokens"
  for (const Row& r : rows) {
    const auto count = per_layer.find(r.op);
    if (count == per_layer.end()) continue;
    Sum& s = layers[r.gpu + " " + r.model + " tp" + std::to_string(r.tp) + " " + std::to_string(r.tokens)];
    s.ours += count->second * price_row(r).ms;
    s.measured += count->second * r.measured_ms;
    ++s.ops;
  }
  REQUIRE(layers.size() == 96);  // 2 GPUs x 3 configurations x 16 token counts
  int within5 = 0, within10 = 0;
  double worst = 0;
  std::string worst_key;
  for (const auto& [key, s] : layers) {
    REQUIRE(s.ops == 7);
    const double err = std::fabs(s.ours / s.measured - 1);
    within5 += err <= 0.05;
    within10 += err <= 0.10;
    if (err > worst) worst = err, worst_key = key;
  }
  std::printf("layer sums: %d of %zu within 5%%, %d within 10%%, worst %.1f%% (%s)\n", within5, layers.size(), within10,
              100 * worst, worst_key.c_str());
  CHECK(worst <= 0.15);

  // A whole layer of a step: the sums above with the attention point
  // measured at the same batch tokens (A100: 70B TP 2's decode and prefill
  // grids, 7B's decode batches), as a step of one kind prices it.
  int whole = 0, whole5 = 0, whole10 = 0;
  double whole_worst = 0;
  std::string whole_worst_key;
  for (const Row& r : rows) {
    if (r.op != "attn_decode" && r.op != "attn_prefill") continue;
    const auto layer =
        layers.find(r.gpu + " " + r.model + " tp" + std::to_string(r.tp) + " " + std::to_string(r.batch * r.tokens));
    if (layer == layers.end()) continue;
    const double err =
        std::fabs((layer->second.ours + price_row(r).ms) / (layer->second.measured + r.measured_ms) - 1);
    ++whole;
    whole5 += err <= 0.05;
    whole10 += err <= 0.10;
    if (err > whole_worst)
      whole_worst = err, whole_worst_key = layer->first + " " + r.op + " context " + std::to_string(r.context);
  }
  std::printf("whole layers with attention: %d of %d within 5%%, %d within 10%%, worst %.1f%% (%s)\n", whole5, whole,
              whole10, 100 * whole_worst, whole_worst_key.c_str());
  REQUIRE(whole == 47);  // the attention points with a layer at their batch tokens
  CHECK(whole_worst <= 0.15);
}
