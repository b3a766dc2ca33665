// The simulator's quantization speedups against published figures
// (docs/quantization.md has the table and its sources). Each case runs the
// benchmark's shape (a full batch of requests arriving together, their
// prompt and output lengths) unquantised and quantised, and compares the
// ratio of the end-to-end times with the published speedup.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "hwprofiles/hardware_desc.hpp"
#include "models/quantization.hpp"
#include "models/step_ops.hpp"
#include "sim/roofline_cost_model.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

// The time from the batch's arrival to its last token.
double makespan(ClusterConfig config, int batch, int prompt, int output) {
  Cluster cluster = build_cluster(config);
  SimOptions options;
  Simulator sim(std::move(cluster.replicas), options);
  ListSource source;
  for (int i = 0; i < batch; ++i) {
    Request r;
    r.id = i;
    r.prompt_len = prompt;
    r.output_len = output;
    source.requests.push_back(r);
  }
  CollectSink sink;
  sim.run(source, sink);
  Time last = 0;
  for (const RequestRecord& r : sink.requests) last = std::max(last, r.finish);
  return static_cast<double>(last);
}

struct Target {
  const char* what;
  const char* model;
  const char* hw;
  const char* quantization;
  int batch, prompt, output;
  double published;  // speedup over fp16
};

}  // namespace

// TensorRT-LLM's "Speed up inference with SOTA quantization techniques in
// TRT-LLM" (2024): LLaMA-v2-7B on one H100 80GB, input 1024, output 128.
TEST_CASE("FP8 and INT8 SmoothQuant speedups on H100 match TensorRT-LLM's within 15%", "[quantization][targets]") {
  const Target targets[] = {
      {"fp8 bs1", "llama-2-7b", "h100-80gb", "fp8", 1, 1024, 128, 1.51},
      {"fp8 bs8", "llama-2-7b", "h100-80gb", "fp8", 8, 1024, 128, 1.40},
      {"int8 sq bs1", "llama-2-7b", "h100-80gb", "int8_w8a8", 1, 1024, 128, 1.47},
      {"int8 sq bs8", "llama-2-7b", "h100-80gb", "int8_w8a8", 8, 1024, 128, 1.32},
  };
  for (const Target& t : targets) {
    ClusterConfig base = one_group(t.model, t.hw, 1, 1, 1, "fp16");
    ClusterConfig quant = base;
    quant.groups.front().quantization = t.quantization;
    const double ratio = makespan(base, t.batch, t.prompt, t.output) / makespan(quant, t.batch, t.prompt, t.output);
    std::printf("%-12s simulated %.2fx published %.2fx (%+.0f%%)\n", t.what, ratio, t.published,
                100 * (ratio / t.published - 1));
    INFO(t.what << ": simulated " << ratio << "x, published " << t.published << "x");
    CHECK(ratio == Approx(t.published).epsilon(0.15));
  }
}

// Marlin's README (IST-DASLab/marlin): FP16xINT4 at group size 128 runs
// close to the ideal 3.87x of FP16 (16 bits over 4 plus 0.125 bits of
// scales) up to batch sizes of about 16-32, on a large matrix and across
// the linear layers of real models. Measured on an A10, which has no
// profile here; priced on the A100's. Kernel level: Llama-2-7B's four
// linear layers, unquantised against awq.
TEST_CASE("4-bit weight-only GEMMs at batch 1-4 come within 17% of Marlin's ideal 3.87x", "[quantization][targets]") {
  const ModelDesc m = resolve_model("llama-2-7b");
  const HardwareDesc hw = resolve_hardware("a100-80gb");
  const WeightPrecision fp16(Dtype::fp16);
  const WeightPrecision w4(Dtype::fp16, quant_scheme(QuantMethod::awq, false, true));
  RooflineCostModel dense(m, {1, 1}, fp16, Dtype::fp16, roofline_params(hw, fp16));
  RooflineCostModel quant(m, {1, 1}, w4, Dtype::fp16, roofline_params(hw, w4));
  auto linear_ns = [&](RooflineCostModel& model, const WeightPrecision& p, int batch) {
    std::vector<Op> ops;
    step_ops(m, decode_batch(batch, 128), {1, 1}, p, Dtype::fp16, 0, ops);
    double ns = 0;
    for (const Op& op : ops)
      if (is_quantized_linear(op.kind)) ns += model.price(op, 0).time_ns;
    return ns;
  };
  for (int batch : {1, 4, 16, 64, 4096}) {
    const double ratio = linear_ns(dense, fp16, batch) / linear_ns(quant, w4, batch);
    std::printf("w4a16 linear layers bs%-4d simulated %.2fx Marlin's ideal 3.87x (%+.0f%%)\n", batch, ratio,
                100 * (ratio / 3.87 - 1));
    INFO("batch " << batch << ": " << ratio << "x");
    // 3.29x, 15.1% short: the fitted memory curves rate the 4x smaller
    // reads lower and each kernel keeps its launch (docs/quantization.md).
    if (batch <= 4) CHECK(ratio == Approx(3.87).epsilon(0.17));
    // At 16 the fp16-fitted compute curve already binds (docs/quantization.md):
    // still well ahead of fp16, short of Marlin's ideal.
    if (batch == 16) CHECK(ratio > 2.5);
    // Compute bound: the dequantisation makes the kernel slower than fp16.
    if (batch == 4096) {
      CHECK(ratio < 1.0);
      CHECK(ratio > 0.7);
    }
  }
}
