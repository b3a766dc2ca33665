// Quantization in the simulator: vLLM's method names, the kernel each GPU
// runs them with, the real weight bytes in the memory plan, and the prices:
// weight-only kernels win at small batch (fewer bytes) and pay their
// dequantisation when compute bound; W8A8 runs on the format's own peak.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/error.hpp"
#include "models/quantization.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

ClusterConfig quantized(const std::string& model, const std::string& hw, const std::string& method,
                        const std::string& dtype = "", int tp = 1) {
  ClusterConfig c = one_group(model, hw, tp, 1, 1, dtype);
  c.groups.front().quantization = method;
  return c;
}

// The stage time of one step shape on the group's cost model.
double step_ns(const ClusterConfig& config, const BatchShape& shape) {
  Cluster cluster = build_cluster(config);
  return static_cast<double>(price(*cluster.replicas.front().cost_model, shape));
}

BatchShape prefill(int tokens) {
  BatchShape s;
  s.seqs.push_back(SeqShape{tokens, 0, true});
  return s;
}

}  // namespace

TEST_CASE("quantization methods take vLLM's names", "[quantization]") {
  CHECK(parse_quant_method("fp8") == QuantMethod::fp8);
  CHECK(parse_quant_method("awq") == QuantMethod::awq);
  CHECK(parse_quant_method("awq_marlin") == QuantMethod::awq);
  CHECK(parse_quant_method("gptq_marlin") == QuantMethod::gptq);
  CHECK(parse_quant_method("int8_w8a8") == QuantMethod::int8_w8a8);
  CHECK(parse_quant_method("") == QuantMethod::none);
  CHECK_THROWS_WITH(parse_quant_method("nf4"), Catch::Contains("unknown quantization 'nf4'") && Catch::Contains("gptq"));
  for (QuantMethod m : {QuantMethod::fp8, QuantMethod::awq, QuantMethod::int8_w8a8, QuantMethod::int8})
    CHECK(parse_quant_method(quant_method_name(m)) == m);
}

TEST_CASE("each GPU runs a method with the kernel its tensor cores allow", "[quantization]") {
  const Cluster h100 = build_cluster(quantized("llama-3.1-8b", "h100-80gb", "fp8"));
  CHECK_FALSE(h100.groups.front().precision.quant.weight_only);
  CHECK(h100.groups.front().precision.quant.gemm_dtype == Dtype::fp8);
  // A100 has no fp8 tensor cores: vLLM runs fp8 checkpoints weight-only.
  const Cluster a100 = build_cluster(quantized("llama-3.1-8b", "a100-80gb", "fp8"));
  CHECK(a100.groups.front().precision.quant.weight_only);
  CHECK(a100.groups.front().precision.quant.kernel == "w8a16_fp8_marlin");
  CHECK_FALSE(build_cluster(quantized("llama-3.1-8b", "a100-80gb", "int8_w8a8")).groups.front().precision.quant.weight_only);
  CHECK_FALSE(build_cluster(quantized("llama-3.1-8b", "l40s", "int8_w8a8")).groups.front().precision.quant.weight_only);
  const Cluster awq = build_cluster(quantized("llama-3.1-8b", "h100-80gb", "awq"));
  CHECK(awq.groups.front().precision.quant.weight_bits == 4);
  CHECK(awq.groups.front().precision.quant.group_size == 128);
  // --dtype fp8 is --quantization fp8 with 16-bit activations.
  const Cluster alias = build_cluster(one_group("llama-3.1-8b", "h100-80gb", 1, 1, 1, "fp8"));
  CHECK(alias.groups.front().dtype == Dtype::bf16);
  CHECK(alias.groups.front().precision.quant.method == QuantMethod::fp8);
  CHECK_THROWS_WITH(build_cluster(quantized("llama-3.1-8b", "h100-80gb", "awq", "fp8")),
                    Catch::Contains("--dtype") && Catch::Contains("awq"));
  CHECK_THROWS_WITH(build_cluster(quantized("llama-3.1-8b", "h100-80gb", "awq", "fp32")), Catch::Contains("16-bit"));
}

TEST_CASE("weight bytes count the quantised format, its scales and the 16-bit rest", "[quantization]") {
  const ModelDesc m = resolve_model("llama-3.1-8b");
  const WeightPrecision bf16(Dtype::bf16);
  CHECK(weight_bytes(m, bf16) == 2 * param_count(m));
  const WeightPrecision awq(Dtype::bf16, quant_scheme(QuantMethod::awq, true, true));
  // 4 bits plus a 2-byte scale and a 4-bit zero per 128 weights in the
  // projections; the embedding and LM head (2 x 128256 x 4096) stay bf16.
  const double dense = 2.0 * 128256 * 4096 + 4096;
  const double linear = static_cast<double>(param_count(m)) - dense - 32.0 * 2 * 4096;
  const double expected = linear * (0.5 + 2.5 / 128) + (dense + 32.0 * 2 * 4096) * 2;
  CHECK(static_cast<double>(weight_bytes(m, awq)) == Approx(expected).epsilon(1e-6));
  const WeightPrecision fp8(Dtype::bf16, quant_scheme(QuantMethod::fp8, true, true));
  CHECK(weight_bytes(m, fp8) < weight_bytes(m, bf16) * 6 / 10);
  CHECK(weight_bytes(m, awq) < weight_bytes(m, fp8));
  // TP and PP split the quantised bytes as they split the parameters.
  const ParallelLayout one{1, 1}, tp2{2, 1};
  CHECK(weight_bytes_per_gpu(m, awq, one, 0) == weight_bytes(m, awq));
  CHECK(static_cast<double>(weight_bytes_per_gpu(m, awq, tp2, 0)) ==
        Approx(static_cast<double>(weight_bytes(m, awq)) / 2).epsilon(0.01));
}

TEST_CASE("the memory plan gives the bytes quantization frees to the KV cache", "[quantization]") {
  const Cluster bf16 = build_cluster(one_group("llama-3.1-70b", "h100-80gb", 4, 1));
  const Cluster fp8 = build_cluster(quantized("llama-3.1-70b", "h100-80gb", "fp8", "", 4));
  const Cluster awq = build_cluster(quantized("llama-3.1-70b", "h100-80gb", "awq", "", 4));
  const MemoryPlan& m16 = bf16.groups.front().memory;
  const MemoryPlan& m8 = fp8.groups.front().memory;
  const MemoryPlan& m4 = awq.groups.front().memory;
  CHECK(m8.num_blocks > m16.num_blocks);
  CHECK(m4.num_blocks > m8.num_blocks);
  // The blocks gained are the weight bytes saved.
  const ModelDesc m = resolve_model("llama-3.1-70b");
  const double saved = static_cast<double>(weight_bytes_per_gpu(m, Dtype::bf16, {4, 1}, 0) -
                                           weight_bytes_per_gpu(m, fp8.groups.front().precision, {4, 1}, 0));
  CHECK(static_cast<double>(m8.num_blocks - m16.num_blocks) * m16.block_bytes == Approx(saved).epsilon(0.01));
  // fp8 KV halves a block: twice the blocks in the same budget, about.
  ClusterConfig kv8 = quantized("llama-3.1-8b", "h100-80gb", "fp8");
  kv8.groups.front().kv_dtype = "fp8";
  const double blocks16 = static_cast<double>(build_cluster(quantized("llama-3.1-8b", "h100-80gb", "fp8")).groups.front().memory.num_blocks);
  const double blocks8 = static_cast<double>(build_cluster(kv8).groups.front().memory.num_blocks);
  CHECK(blocks8 / blocks16 == Approx(2.0).epsilon(0.01));
}

TEST_CASE("weight-only kernels win at small batch and pay dequantisation at large batch", "[quantization]") {
  const ClusterConfig bf16 = one_group("llama-2-7b", "a100-80gb", 1, 1, 1, "fp16");
  const ClusterConfig awq = quantized("llama-2-7b", "a100-80gb", "awq", "fp16");
  // Batch 1 decode reads the weights: 4-bit weights make it about 3x faster.
  const double decode = step_ns(bf16, decode_batch(1, 512)) / step_ns(awq, decode_batch(1, 512));
  CHECK(decode > 2.2);
  CHECK(decode < 3.9);
  // A 4096-token prefill is compute bound: the same tensor-core FLOPs plus
  // the dequantisation of every weight per 64 rows, a few tens of percent.
  const double big = step_ns(awq, prefill(4096)) / step_ns(bf16, prefill(4096));
  CHECK(big > 1.05);
  CHECK(big < 1.4);
  // The dequantisation is hidden under the weights' bytes at batch 1:
  // int8 weight-only costs what its bytes cost.
  const ClusterConfig w8 = quantized("llama-2-7b", "a100-80gb", "fp8", "fp16");
  const double w8_decode = step_ns(bf16, decode_batch(1, 512)) / step_ns(w8, decode_batch(1, 512));
  CHECK(w8_decode > 1.6);
  CHECK(w8_decode < 2.0);
}

TEST_CASE("W8A8 runs the linear layers on the format's own peak", "[quantization]") {
  const ClusterConfig bf16 = one_group("llama-3.1-8b", "h100-80gb");
  const double fp8 = step_ns(bf16, prefill(4096)) / step_ns(quantized("llama-3.1-8b", "h100-80gb", "fp8"), prefill(4096));
  // The projections run twice as fast; attention, norms and the LM head do not.
  CHECK(fp8 > 1.5);
  CHECK(fp8 < 2.0);
  // --dtype fp8 is the same replica as --quantization fp8.
  CHECK(step_ns(one_group("llama-3.1-8b", "h100-80gb", 1, 1, 1, "fp8"), prefill(4096)) ==
        step_ns(quantized("llama-3.1-8b", "h100-80gb", "fp8"), prefill(4096)));
  // Unquantised ops are priced as before.
  std::vector<OpCost> plain, quant;
  Cluster a = build_cluster(bf16), b = build_cluster(quantized("llama-3.1-8b", "h100-80gb", "fp8"));
  (void)price(*a.replicas.front().cost_model, prefill(512), &plain);
  (void)price(*b.replicas.front().cost_model, prefill(512), &quant);
  REQUIRE(plain.size() == quant.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    if (plain[i].kind == OpKind::attn_prefill || plain[i].kind == OpKind::lm_head) CHECK(plain[i].time_ns == quant[i].time_ns);
    if (is_quantized_linear(plain[i].kind)) CHECK(quant[i].time_ns < plain[i].time_ns);
  }
}

TEST_CASE("quantization errors name the key and the hardware", "[quantization]") {
  ClusterConfig none_on_cpu = quantized("small", "cpu", "int8");
  CHECK(build_cluster(none_on_cpu).groups.front().precision.quant.kernel == "w8a16_int8");
  // (A profile's own quantization against the group's: calibrated_cost_model_test.)
}
