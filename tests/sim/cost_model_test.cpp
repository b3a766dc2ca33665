#include <catch2/catch.hpp>

#include "models/model_math.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

double gemm_bytes(const std::vector<OpCost>& ops) {
  double b = 0;
  for (const auto& op : ops) {
    if (op.kind == OpKind::qkv_proj || op.kind == OpKind::o_proj || op.kind == OpKind::gate_up_proj ||
        op.kind == OpKind::down_proj)
      b += op.bytes;
  }
  return b;
}

double time_of(const std::vector<OpCost>& ops, OpKind kind) {
  double t = 0;
  for (const auto& op : ops) if (op.kind == kind) t += op.time_ns;
  return t;
}

}  // namespace

TEST_CASE("decode at batch 1 of Llama-2-7B fp16 on A100 costs about the weights over HBM bandwidth") {
  Cluster c = build_cluster(one_group("llama-2-7b", "a100-80gb", 1, 1, 1, "fp16"));
  const GroupPlan& g = c.groups.front();
  const double weights = static_cast<double>(weight_bytes(g.model, Dtype::fp16));
  const double effective_bw = g.hardware.memory_bandwidth_gbps * 1e9 * g.hardware.memory_efficiency;
  const double expected_ns = weights / effective_bw * 1e9;
  std::vector<OpCost> ops;
  const Time t = price(*c.replicas[0].cost_model, decode_batch(1, 512), &ops);
  INFO("decode step " << to_millis(t) << " ms, weights / effective bandwidth " << expected_ns / 1e6 << " ms");
  CHECK(to_millis(t) > 3.0);   // several milliseconds
  CHECK(to_millis(t) < 15.0);
  CHECK(static_cast<double>(t) >= 0.95 * expected_ns);  // cannot beat the memory roof
  CHECK(static_cast<double>(t) <= 1.35 * expected_ns);  // launches and step overhead on top
  for (const auto& op : ops) {
    if (op.kind == OpKind::qkv_proj || op.kind == OpKind::down_proj) CHECK_FALSE(op.compute_bound);
  }
}

TEST_CASE("a 2,048-token prefill is compute-bound") {
  Cluster c = build_cluster(one_group("llama-2-7b", "a100-80gb", 1, 1, 1, "fp16"));
  BatchShape prefill;
  prefill.seqs.push_back(SeqShape{2048, 0, true});
  std::vector<OpCost> ops;
  const Time t = price(*c.replicas[0].cost_model, prefill, &ops);
  double flops = 0, compute_time = 0, total_time = 0;
  for (const auto& op : ops) {
    flops += op.flops;
    total_time += op.time_ns;
    if (op.compute_bound) compute_time += op.time_ns;
    if (op.kind == OpKind::qkv_proj || op.kind == OpKind::gate_up_proj || op.kind == OpKind::down_proj)
      CHECK(op.compute_bound);
  }
  CHECK(compute_time > 0.8 * total_time);
  // About 2 x params x tokens FLOPs at a healthy fraction of the 312 TFLOPS peak.
  const double achieved = flops / (static_cast<double>(t) / 1e9);
  CHECK(achieved > 0.4 * 312e12);
  CHECK(achieved < 0.9 * 312e12);
  CHECK(to_millis(t) > 50);
}

TEST_CASE("per-token decode cost falls as the batch grows") {
  Cluster c = build_cluster(one_group("llama-3.1-8b", "h100-80gb"));
  CostModel& m = *c.replicas[0].cost_model;
  double last = 1e300;
  for (int batch : {1, 4, 16, 64, 256}) {
    const double per_token = static_cast<double>(price(m, decode_batch(batch, 1024))) / batch;
    CHECK(per_token < last);
    last = per_token;
  }
}

TEST_CASE("TP=2 halves per-GPU weight traffic and adds all-reduce time") {
  Cluster one = build_cluster(one_group("llama-2-7b", "a100-80gb", 1, 1, 1, "fp16"));
  Cluster two = build_cluster(one_group("llama-2-7b", "a100-80gb", 2, 1, 1, "fp16"));
  std::vector<OpCost> ops1, ops2;
  const Time t1 = price(*one.replicas[0].cost_model, decode_batch(8, 1024), &ops1);
  const Time t2 = price(*two.replicas[0].cost_model, decode_batch(8, 1024), &ops2);
  CHECK(gemm_bytes(ops2) == Approx(gemm_bytes(ops1) / 2).epsilon(0.02));
  CHECK(time_of(ops1, OpKind::tp_allreduce) == 0);
  CHECK(time_of(ops2, OpKind::tp_allreduce) > 0);
  CHECK(t2 < t1);  // memory-bound decode still gains
}

TEST_CASE("the efficiency curve interpolates in log FLOPs and clamps") {
  EfficiencyCurve curve;
  curve.points = {{1e6, 0.1}, {1e8, 0.5}};
  CHECK(curve.at(1e7) == Approx(0.3));
  curve.prepare();
  CHECK(curve.at(1e5) == Approx(0.1));
  CHECK(curve.at(1e7) == Approx(0.3));
  CHECK(curve.at(1e9) == Approx(0.5));
}

TEST_CASE("swaps are priced over the host link") {
  Cluster c = build_cluster(one_group("llama-3.1-8b", "h100-80gb"));
  CostModel& m = *c.replicas[0].cost_model;
  CHECK(m.swap_time(0) == 0);
  const Time one = m.swap_time(1), hundred = m.swap_time(100);
  CHECK(hundred > 50 * (one - static_cast<Time>(c.groups[0].hardware.pcie_latency_us * 1e3)));
}

TEST_CASE("TP all-reduce, logits gather and PP sends are priced from the interconnect's links") {
  // One decode of Llama-2-7B: the all-reduced buffer is 4096 x 2 bytes.
  const double bytes = 4096.0 * 2;
  auto op_each = [](const std::vector<OpCost>& ops, OpKind kind) {
    for (const auto& op : ops)
      if (op.kind == kind) return op.time_ns / op.repeat;
    return -1.0;
  };
  SECTION("A100 on an NVSwitch board: two NVLink hops of 42.1 us / 14 each") {
    Cluster c = build_cluster(one_group("llama-2-7b", "a100-80gb", 2, 2, 1, "fp16"));
    std::vector<OpCost> ops;
    price(*c.replicas[0].cost_model, decode_batch(1, 100), &ops);
    const double hop = 42.1e3 / 14;  // ns per GPU-to-GPU path
    const double ring = bytes / (300e9 * 0.71) * 1e9 + 2 * hop;
    CHECK(op_each(ops, OpKind::tp_allreduce) == Approx(ring + 3000));  // + the A100's 3 us kernel floor
    // The first stage sends hidden states and residual (2 x 4096 x 2 bytes)
    // to the next stage's first GPU: GPU 2, on the same switch.
    CHECK(op_each(ops, OpKind::pp_send) == Approx(hop + 2 * bytes / 300e9 * 1e9 + 3000));
    std::vector<OpCost> last;
    price(*c.replicas[0].cost_model, decode_batch(1, 100), &last, 1);
    const double gather_bytes = 32000.0 * 2;  // the whole vocabulary's logits
    CHECK(op_each(last, OpKind::tp_gather) == Approx((gather_bytes / (300e9 * 0.71) * 1e9 + 2 * hop) / 2 + 3000));
  }
  SECTION("L40S over PCIe: GPU - host - GPU, 10 us and 32 GB/s each way") {
    Cluster c = build_cluster(one_group("llama-2-7b", "l40s", 2, 1, 1, "fp16"));
    std::vector<OpCost> ops;
    price(*c.replicas[0].cost_model, decode_batch(1, 100), &ops);
    const double ring = bytes / (32e9 * 0.8) * 1e9 + 2 * 20000;
    CHECK(op_each(ops, OpKind::tp_allreduce) == Approx(ring + 4000));
  }
}

TEST_CASE("a step priced from the roofline's cache of repeated shapes is the op-by-op price to the ns") {
  // stage_time without a breakdown reuses the prices of the ops that depend
  // only on (tokens, sampling, stage); with one it prices every op.
  ClusterConfig moe = one_group("mixtral-8x7b", "h100-80gb", 2);
  moe.groups[0].ep = 2;
  for (const ClusterConfig& config : {one_group("llama-3.1-8b", "h100-80gb"), one_group("llama-3.1-70b", "h100-80gb", 2, 2), moe}) {
    Cluster c = build_cluster(config);
    CostModel& model = *c.replicas[0].cost_model;
    const int stages = config.groups[0].pp;
    std::uint64_t state = 11;
    const auto next = [&state](int n) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<int>((state >> 33) % static_cast<std::uint64_t>(n));
    };
    int checked = 0;
    for (int trial = 0; trial < 600; ++trial) {
      BatchShape b;
      const int seqs = 1 + next(6);
      for (int i = 0; i < seqs; ++i) {
        const std::int64_t n = next(3) == 0 ? 1 + next(300) : 1;
        b.seqs.push_back({n, next(4) == 0 ? 0 : next(4000), next(4) != 0});
      }
      for (int stage = 0; stage < stages; ++stage) {
        std::vector<OpCost> ops;
        const Time op_by_op = price(model, b, &ops, stage);
        CHECK(price(model, b, nullptr, stage) == op_by_op);
        CHECK(price(model, b, nullptr, stage) == op_by_op);
        ++checked;
      }
    }
    CHECK(checked >= 600);
  }
}
