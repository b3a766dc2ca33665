// The engines' own TP all-reduce kernels (sim/custom_all_reduce.hpp;
// docs/engines.md, "TP all-reduce"): when a preset uses one, and that the
// cost model prices those calls on the profile's custom_all_reduce curve
// and the rest on NCCL's.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/core/replica.hpp"
#include "sim/custom_all_reduce.hpp"
#include "sim/roofline_cost_model.hpp"
#include "sim_test_util.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"

using namespace twin;
using namespace twin::test;

namespace {

constexpr double kMiB = 1024.0 * 1024;

RingCost ring(int size, PathLink link) {
  RingCost r;
  r.size = size;
  r.link = link;
  return r;
}

double below(const std::string& preset, int size, PathLink link, bool p2p = false) {
  return custom_all_reduce_below(replica_preset(preset), ring(size, link), p2p);
}

const OpCost* allreduce(const std::vector<OpCost>& ops) {
  for (const auto& op : ops)
    if (op.kind == OpKind::tp_allreduce) return &op;
  return nullptr;
}

BatchShape prompt(int tokens) {
  BatchShape s;
  s.seqs.push_back(SeqShape{tokens, 0, true});
  return s;
}

}  // namespace

TEST_CASE("the engine presets all-reduce small messages on NVLink with their own kernel") {
  // vLLM: 2, 4, 6 or 8 GPUs, below its 8 MiB buffer; symmetric memory
  // takes over above 512 KiB on 6 GPUs and 256 KiB on 8.
  CHECK(below("vllm", 2, PathLink::nvswitch) == 8 * kMiB);
  CHECK(below("vllm", 4, PathLink::nvswitch) == 8 * kMiB);
  CHECK(below("vllm", 6, PathLink::nvswitch) == 0.5 * kMiB);
  CHECK(below("vllm", 8, PathLink::nvswitch) == 0.25 * kMiB);
  CHECK(below("vllm", 2, PathLink::nvlink_bridge) == 8 * kMiB);
  CHECK(below("vllm-v0", 8, PathLink::nvswitch) == 8 * kMiB);
  CHECK(below("sglang", 8, PathLink::nvswitch) == 8 * kMiB);
  CHECK(below("trtllm", 4, PathLink::nvswitch) == 8 * kMiB);
  // Unsupported world sizes, nodes apart, one GPU: NCCL.
  for (int size : {3, 5, 16}) CHECK(below("vllm", size, PathLink::nvswitch) == 0);
  CHECK(below("vllm", 2, PathLink::network) == 0);
  CHECK(below("vllm", 1, PathLink::none) == 0);
  // PCIe: a pair with peer-to-peer only; never more than two cards.
  CHECK(below("vllm", 2, PathLink::pcie, true) == 8 * kMiB);
  CHECK(below("vllm", 2, PathLink::pcie, false) == 0);
  CHECK(below("vllm", 4, PathLink::pcie, true) == 0);
  // Scheduling presets stand for no engine; the option turns it off.
  CHECK(below("sarathi", 4, PathLink::nvswitch) == 0);
  ReplicaConfig off = replica_preset("vllm");
  set_replica_option(off, "custom_all_reduce", "false");
  CHECK(custom_all_reduce_below(off, ring(4, PathLink::nvswitch), false) == 0);
  CHECK_THROWS_WITH(set_replica_option(off, "custom_all_reduce", "maybe"), Catch::Contains("custom_all_reduce"));
}

TEST_CASE("calls under the engine's bound take the custom curve, larger ones NCCL's") {
  // Llama-3.1-8B: a token's hidden state is 4096 x 2 bytes, so a prompt of
  // 512 tokens all-reduces 4 MiB and one of 1024 exactly 8 MiB.
  auto curve_of = [](const std::string& preset, int tp, const BatchShape& shape) {
    ClusterConfig c = one_group("llama-3.1-8b", "h100-80gb", tp);
    c.scheduler_preset = preset;
    Cluster cluster = build_cluster(c);
    std::vector<OpCost> ops;
    price(*cluster.replicas[0].cost_model, shape, &ops);
    REQUIRE(allreduce(ops));
    return std::string(allreduce(ops)->curve);
  };
  CHECK(curve_of("vllm", 4, decode_batch(1, 512)) == "custom_all_reduce_nvswitch_4");
  CHECK(curve_of("vllm", 4, prompt(512)) == "custom_all_reduce_nvswitch_4");
  CHECK(curve_of("vllm", 4, prompt(1024)) == "nccl_all_reduce_nvswitch_4");  // not under 8 MiB
  CHECK(curve_of("vllm", 8, prompt(512)) == "nccl_all_reduce_nvswitch_8");   // over vLLM's 256 KiB on 8
  CHECK(curve_of("sglang", 8, prompt(512)) == "custom_all_reduce_nvswitch_8");
  CHECK(curve_of("sarathi", 4, decode_batch(1, 512)) == "nccl_all_reduce_nvswitch_4");
}

TEST_CASE("a decode's all-reduce costs the custom curve's time, well under NCCL's") {
  ClusterConfig c = one_group("llama-3.1-8b", "h100-80gb", 4);
  Cluster custom = build_cluster(c);
  c.groups.front().scheduler_options.emplace_back("custom_all_reduce", "false");
  Cluster nccl = build_cluster(c);
  std::vector<OpCost> a, b;
  price(*custom.replicas[0].cost_model, decode_batch(8, 512), &a);
  price(*nccl.replicas[0].cost_model, decode_batch(8, 512), &b);
  // 8 x 4096 x 2 = 64 KiB: the H100 curve's 9.1 us (held from 2 KiB up to
  // its 128 KiB point, 9.2 us) against NCCL's 38.4 us.
  const double each = allreduce(a)->time_ns / allreduce(a)->repeat;
  CHECK(each > 9100);
  CHECK(each < 9200);
  CHECK(allreduce(b)->time_ns / allreduce(b)->repeat == Approx(38400));
}

TEST_CASE("vLLM's --disable-custom-all-reduce flag prices every all-reduce on NCCL's curve") {
  if (std::getenv("TWIN_BIN") == nullptr) TWIN_SKIP("TWIN_BIN not set (run through ctest)");
  const std::string cmd = "simulate --model llama-3.1-8b --hw h100-80gb --tensor-parallel-size 4 --explain-ops 8x512";
  const auto on = run_twinserve(cmd, true);
  REQUIRE(on.exit_code == 0);
  CHECK_THAT(on.out, Catch::Contains("custom_all_reduce_nvswitch_4"));
  const auto off = run_twinserve(cmd + " --disable-custom-all-reduce", true);
  REQUIRE(off.exit_code == 0);
  CHECK_THAT(off.out, Catch::Contains("nccl_all_reduce_nvswitch_4") && !Catch::Contains("custom_all_reduce"));
}
