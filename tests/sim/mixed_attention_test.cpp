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
  // two parts alone. Not fitted: the tile is FlashAttention-2's.
  CHECK(one[0].time_ns / one[0].repeat / 1e3 == Approx(709.5).epsilon(0.15));
  // A decode-only step and a prompt alone are unchanged.
  CHECK(attention_of("rtx-4090", decode_batch(32, 2048)).size() == 1);
  CHECK(attention_of("rtx-4090", decode_batch(32, 2048))[0].kind == OpKind::attn_decode);
  // Where the engine runs them apart, two calls.
  CHECK(attention_of("h100-80gb", step).size() == 2);
}
