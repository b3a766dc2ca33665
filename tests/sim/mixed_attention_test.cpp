// A mixed step's attention as the engine runs it (sim/mixed_attention.hpp;
// docs/engines.md, "Mixed steps"): vLLM's FlashAttention-2 backend makes one
// varlen call of the chunk and the decodes, each decode's query padded to a
// 64-row tile; other engines and devices run the two apart.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/replica.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "sim/mixed_attention.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

std::int32_t rows(const char* preset, const char* hw, int knob = -1) {
  ReplicaConfig r = replica_preset(preset);
  r.mixed_attention_rows = knob;
  return mixed_attention_rows_for(r, resolve_hardware(hw));
}

BatchShape mixed(std::int64_t chunk, int decodes, std::int64_t context) {
  BatchShape s = decode_batch(decodes, static_cast<int>(context));
  s.seqs.push_back(SeqShape{chunk, 0, true});
  return s;
}

std::vector<OpCost> attention_of(const char* hw, const BatchShape& shape, const char* knob = nullptr) {
  ClusterConfig c = one_group("llama-3.1-8b", hw, 1);
  c.scheduler_preset = "vllm";
  c.groups.front().scheduler_options.emplace_back("max_model_len", "8192");  // fits the 4090
  if (knob) c.groups.front().scheduler_options.emplace_back("mixed_attention_rows", knob);
  Cluster cluster = build_cluster(c);
  std::vector<OpCost> ops, out;
  price(*cluster.replicas[0].cost_model, shape, &ops);
  for (const OpCost& op : ops)
    if (op.kind == OpKind::attn_prefill || op.kind == OpKind::attn_decode) out.push_back(op);
  return out;
}

}  // namespace

TEST_CASE("vLLM's FlashAttention-2 devices pad a mixed step's decodes and the rest run them apart") {
  CHECK(rows("vllm", "rtx-4090") == 64);                       // 8.9, Ada
  CHECK(rows("vllm", "a100-80gb") == 64);                      // 8.0, Ampere
  CHECK(rows("vllm", "rtx-pro-6000-blackwell-server") == 64);  // 12.0
  CHECK(rows("vllm", "h100-80gb") == 0);                       // 9.0: FlashAttention 3
  CHECK(rows("vllm", "b200") == 0);                            // 10.0: FlashInfer
  CHECK(rows("vllm", "mi300x") == 0);                          // no compute capability
  CHECK(rows("sglang", "rtx-4090") == 0);
  CHECK(rows("trtllm", "rtx-4090") == 0);
  CHECK(rows("vllm-v0", "rtx-4090") == 0);  // v0 called the prefill and decode kernels apart
  // The knob overrides the engine's default either way.
  CHECK(rows("vllm", "rtx-4090", 0) == 0);
  CHECK(rows("sglang", "h100-80gb", 128) == 128);
  CHECK(resolve_hardware("rtx-4090").compute_capability == 8.9);
  CHECK(resolve_hardware("mi300x").compute_capability == 0);
}

TEST_CASE("a mixed step's attention is one call with the decodes' work padded to the tile") {
  const BatchShape step = mixed(1024, 32, 2048);
  const std::vector<OpCost> apart = attention_of("rtx-4090", step, "0");
  const std::vector<OpCost> one = attention_of("rtx-4090", step);
  REQUIRE(apart.size() == 2);
  REQUIRE(one.size() == 1);
  const OpCost& prefill = apart[0].kind == OpKind::attn_prefill ? apart[0] : apart[1];
  const OpCost& decode = apart[0].kind == OpKind::attn_decode ? apart[0] : apart[1];
  CHECK(one[0].kind == OpKind::attn_prefill);
  CHECK(one[0].flops == Approx(prefill.flops + 64 * decode.flops));
  CHECK(one[0].bytes == Approx(prefill.bytes + decode.bytes));
  CHECK(one[0].time_ns > prefill.time_ns + decode.time_ns);
  // Against vLLM 0.19's own varlen call timed by LLMServingSim on an RTX
  // 4090 (profiler/perf/RTX4090/meta-llama/Llama-3.1-8B/bf16/tp1/
  // attention.csv @5daddb2): 709.5 us a layer for this step, 433.2 for its
  // two parts alone. The tile is FlashAttention-2's; the time per grid
  // block was fitted to that file's calls, this one among them.
  CHECK(one[0].time_ns / one[0].repeat / 1e3 == Approx(709.5).epsilon(0.15));
  // A decode-only step and a prompt alone are unchanged.
  CHECK(attention_of("rtx-4090", decode_batch(32, 2048)).size() == 1);
  CHECK(attention_of("rtx-4090", decode_batch(32, 2048))[0].kind == OpKind::attn_decode);
  // Where the engine runs them apart, two calls.
  CHECK(attention_of("h100-80gb", step).size() == 2);
}

TEST_CASE("a mixed call's decodes pay a grid block per query head and tile of the longest chunk") {
  // vllm-flash-attn's varlen grid: ceil(longest chunk / 64) tiles x seqs x
  // heads; a decode's tiles past its one query row exit at once but each
  // block takes the device's time (HardwareDesc::mixed_attention_block_ns).
  const ModelDesc model = resolve_model("llama-3.1-8b");
  const HardwareDesc hw = resolve_hardware("rtx-4090");
  CHECK(hw.mixed_attention_block_ns == Approx(5.83));
  CHECK(resolve_hardware("a100-80gb").mixed_attention_block_ns == 0);  // not measured: not priced
  auto attention_ns = [&](double block_ns, const BatchShape& shape) {
    RooflineParams p = roofline_params(hw, Dtype::bf16);
    p.mixed_attention_rows = 64;
    p.mixed_attention_block_ns = block_ns;
    RooflineCostModel cost(model, ParallelLayout{1, 1}, Dtype::bf16, Dtype::bf16, p);
    std::vector<OpCost> ops;
    price(cost, shape, &ops);
    double ns = 0;
    for (const OpCost& op : ops)
      if (op.kind == OpKind::attn_prefill || op.kind == OpKind::attn_decode) ns += op.time_ns;
    return ns;
  };
  // 1,000 new tokens: 16 tiles; 24 decodes, 32 query heads, 32 layers.
  const BatchShape step = mixed(1000, 24, 700);
  CHECK(attention_ns(5.0, step) - attention_ns(0.0, step) == Approx(24.0 * 32 * 16 * 5.0 * 32));
  // The longest chunk sets the tiles, whatever the other chunks.
  BatchShape two = step;
  two.seqs.push_back(SeqShape{200, 0, true});
  CHECK(attention_ns(5.0, two) - attention_ns(0.0, two) == Approx(24.0 * 32 * 16 * 5.0 * 32));
  // No decodes, or none in the call (a decode-only step): nothing added.
  const BatchShape prompt = mixed(1000, 0, 700);
  CHECK(attention_ns(5.0, prompt) == attention_ns(0.0, prompt));
  CHECK(attention_ns(5.0, decode_batch(24, 700)) == attention_ns(0.0, decode_batch(24, 700)));
  // Against the 4090's own calls (the same file as above, also in the
  // fit): 64 decodes of 256 keys beside a 512-token chunk took 286.8 us a
  // layer; the two roofs alone priced 191 us (-33%).
  const double ns = attention_ns(hw.mixed_attention_block_ns, mixed(512, 64, 256)) / static_cast<double>(model.num_hidden_layers);
  CHECK(ns / 1e3 == Approx(286.8).epsilon(0.10));
}
