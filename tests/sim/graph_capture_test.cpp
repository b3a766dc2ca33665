// CUDA-graph padding as each engine does it (sim/graph_capture.hpp;
// docs/engines.md): vLLM's and SGLang's capture sizes, SGLang's default
// largest size by GPU memory and TP, and that the roofline prices a step
// at its padded size only where the engine runs it as a graph.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "engine/core/replica.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/step_ops.hpp"
#include "sim/graph_capture.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

GraphCapture sizes(GraphCapture::Sizes s, std::int64_t max) {
  GraphCapture g;
  g.sizes = s;
  g.max_tokens = max;
  return g;
}

std::int64_t sglang_max(const char* hw, int tp, int max_num_seqs = 1024) {
  ReplicaConfig r = replica_preset("sglang");
  r.scheduler.max_num_seqs = max_num_seqs;
  return graph_capture_for(r, resolve_hardware(hw), tp).max_tokens;
}

BatchShape prompt(int tokens) {
  BatchShape s;
  s.seqs.push_back(SeqShape{tokens, 0, true});
  return s;
}

}  // namespace

TEST_CASE("vLLM pads every step to its capture sizes, SGLang decode batches to its own") {
  const GraphCapture vllm = sizes(GraphCapture::Sizes::vllm, 512);
  CHECK(cudagraph_padded_tokens(3, vllm) == 4);
  CHECK(cudagraph_padded_tokens(9, vllm) == 16);
  CHECK(cudagraph_padded_tokens(257, vllm) == 272);
  CHECK(cudagraph_padded_tokens(9, vllm, false) == 16);  // mixed steps too
  CHECK(cudagraph_padded_tokens(513, vllm) == 513);      // above the largest: eager
  const GraphCapture sglang = sizes(GraphCapture::Sizes::sglang, 1024);
  CHECK(cudagraph_padded_tokens(5, sglang) == 8);
  CHECK(cudagraph_padded_tokens(9, sglang) == 12);   // SGLang captures 12, vLLM does not
  CHECK(cudagraph_padded_tokens(13, sglang) == 16);
  CHECK(cudagraph_padded_tokens(257, sglang) == 272);
  CHECK(cudagraph_padded_tokens(497, sglang) == 512);
  CHECK(cudagraph_padded_tokens(513, sglang) == 544);  // multiples of 32 above 512
  CHECK(cudagraph_padded_tokens(9, sglang, false) == 9);  // prefill batches run eagerly
  // The largest size is the cap itself; 0 is eager.
  CHECK(cudagraph_padded_tokens(100, sizes(GraphCapture::Sizes::sglang, 100)) == 100);
  CHECK(cudagraph_padded_tokens(99, sizes(GraphCapture::Sizes::sglang, 100)) == 100);
  CHECK(cudagraph_padded_tokens(3, sizes(GraphCapture::Sizes::vllm, 0)) == 3);
}

TEST_CASE("SGLang's largest capture size follows the GPU's memory and TP") {
  CHECK(sglang_max("l4", 1) == 24);     // 24 GB: under 35 GiB
  CHECK(sglang_max("l4", 4) == 80);
  CHECK(sglang_max("l40s", 1) == 32);   // 48 GB
  CHECK(sglang_max("l40s", 4) == 160);
  CHECK(sglang_max("h100-80gb", 1) == 256);
  CHECK(sglang_max("h100-80gb", 8) == 512);
  CHECK(sglang_max("h200", 2) == 256);
  CHECK(sglang_max("b200", 1) == 512);  // over 160 GiB
  CHECK(sglang_max("h100-80gb", 1, 48) == 48);  // never above max_running_requests
  // vLLM: min(2 x max_num_seqs, 512); the knob overrides either.
  ReplicaConfig v = replica_preset("vllm");
  v.scheduler.max_num_seqs = 128;
  CHECK(graph_capture_for(v, resolve_hardware("h100-80gb"), 1).max_tokens == 256);
  CHECK(graph_capture_for(v, resolve_hardware("h100-80gb"), 1).sizes == GraphCapture::Sizes::vllm);
  set_replica_option(v, "graph_capture_max_tokens", "0");
  CHECK(graph_capture_for(v, resolve_hardware("h100-80gb"), 1).max_tokens == 0);
  // TensorRT-LLM pads nothing by default (cuda_graph_config enable_padding false).
  CHECK(graph_capture_for(replica_preset("trtllm"), resolve_hardware("h100-80gb"), 1).max_tokens == 0);
}

TEST_CASE("the roofline prices a padded decode above an unpadded one, SGLang's prefill unpadded") {
  auto step_ns = [](const char* preset, bool eager, const BatchShape& shape) {
    ClusterConfig c = one_group("llama-3.1-8b", "h100-80gb", 1);
    c.scheduler_preset = preset;
    if (eager) c.groups.front().scheduler_options.emplace_back("graph_capture_max_tokens", "0");
    Cluster cluster = build_cluster(c);
    return price(*cluster.replicas[0].cost_model, shape);
  };
  // 9 decodes: SGLang runs a graph of 12, vLLM one of 16.
  CHECK(step_ns("sglang", false, decode_batch(9, 512)) > step_ns("sglang", true, decode_batch(9, 512)));
  CHECK(step_ns("vllm", false, decode_batch(9, 512)) > step_ns("sglang", false, decode_batch(9, 512)));
  // A 9-token prompt: vLLM pads it, SGLang runs it eagerly.
  CHECK(step_ns("sglang", false, prompt(9)) == step_ns("sglang", true, prompt(9)));
  CHECK(step_ns("vllm", false, prompt(9)) > step_ns("vllm", true, prompt(9)));
}
