// fp8 activation quantisation kernels priced per engine (docs/engines.md,
// "fp8 activation quantisation"; sim/input_quant_kernels.hpp).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/input_quant_kernels.hpp"
#include "sim/roofline_cost_model.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

const OpCost& op_of(const std::vector<OpCost>& ops, OpKind kind) {
  for (const auto& op : ops)
    if (op.kind == kind) return op;
  FAIL("no op " << op_name(kind));
  return ops.front();
}

// The first replica's priced ops for a decode batch under `preset`.
std::vector<OpCost> decode_ops(const std::string& preset, const std::string& quantization) {
  ClusterConfig c = one_group("llama-3.1-8b", "h200");
  c.scheduler_preset = preset;
  c.groups.front().quantization = quantization;
  Cluster cluster = build_cluster(c);
  std::vector<OpCost> ops;
  price(*cluster.replicas[0].cost_model, decode_batch(32, 1024), &ops);
  return ops;
}

}  // namespace

TEST_CASE("which fp8 GEMM inputs each engine quantises in a kernel of its own") {
  WeightPrecision fp8;
  fp8.dtype = Dtype::bf16;
  fp8.quant.method = QuantMethod::fp8;
  fp8.quant.weight_only = false;
  fp8.quant.gemm_dtype = Dtype::fp8;
  SchedulerConfig config;
  config.preset = "vllm";
  CHECK(separate_input_quant(config, fp8) == op_kind_bit(OpKind::o_proj));
  config.preset = "sglang";
  const OpKindSet four = separate_input_quant(config, fp8);
  for (OpKind k : {OpKind::qkv_proj, OpKind::o_proj, OpKind::gate_up_proj, OpKind::down_proj})
    CHECK((four & op_kind_bit(k)) != 0);
  CHECK((four & op_kind_bit(OpKind::lm_head)) == 0);
  config.preset = "trtllm";
  CHECK(separate_input_quant(config, fp8) == 0);
  config.preset = "vllm";
  CHECK(separate_input_quant(config, WeightPrecision{}) == 0);  // bf16: nothing to quantise
}

TEST_CASE("a separate quantisation kernel adds a pass over the GEMM's input and a launch") {
  const auto vllm = decode_ops("vllm", "fp8");
  const auto trtllm = decode_ops("trtllm", "fp8");
  const auto sglang = decode_ops("sglang", "fp8");
  const OpCost& o_vllm = op_of(vllm, OpKind::o_proj);
  const OpCost& o_trt = op_of(trtllm, OpKind::o_proj);
  // 32 rows of 4096 bf16 activations read, fp8 written, a 4-byte scale each.
  const double quant_bytes = 32.0 * 4096 * (2 + 1) + 32.0 * 4;
  CHECK(o_vllm.bytes == Approx(o_trt.bytes + quant_bytes * o_trt.repeat));
  CHECK(o_vllm.time_ns > o_trt.time_ns);
  // vLLM fuses the norm's and activation's quantisation: its qkv price is TensorRT-LLM's.
  CHECK(op_of(vllm, OpKind::qkv_proj).time_ns == op_of(trtllm, OpKind::qkv_proj).time_ns);
  CHECK(op_of(sglang, OpKind::qkv_proj).time_ns > op_of(trtllm, OpKind::qkv_proj).time_ns);
  CHECK(op_of(sglang, OpKind::down_proj).time_ns > op_of(trtllm, OpKind::down_proj).time_ns);
  // bf16 replicas are unchanged by the preset.
  CHECK(op_of(decode_ops("vllm", ""), OpKind::o_proj).time_ns ==
        op_of(decode_ops("trtllm", ""), OpKind::o_proj).time_ns);
}
