// FP4 weights (issue 41): MXFP4 and NVFP4 sizes with their scales, the
// kernel vLLM runs on each GPU (FP4 tensor cores on Blackwell, weight-only
// elsewhere, none on ROCm for NVFP4), experts-only MXFP4, checkpoints'
// quantization_config, and the refusals by name.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/error.hpp"
#include "models/quantization.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

ClusterConfig quantized(const std::string& model, const std::string& hw, const std::string& method, int tp = 1) {
  ClusterConfig c = one_group(model, hw, tp);
  c.groups.front().quantization = method;
  return c;
}

BatchShape prefill(int tokens) {
  BatchShape s;
  s.seqs.push_back(SeqShape{tokens, 0, true});
  return s;
}

// The priced ops of one step shape on the group's cost model.
std::vector<OpCost> ops_of(const ClusterConfig& config, const BatchShape& shape) {
  Cluster cluster = build_cluster(config);
  std::vector<OpCost> out;
  price(*cluster.replicas.front().cost_model, shape, &out);
  return out;
}

const OpCost& op(const std::vector<OpCost>& ops, OpKind kind) {
  for (const OpCost& o : ops)
    if (o.kind == kind) return o;
  FAIL("no such op");
  return ops.front();
}

std::string error_of(const ClusterConfig& config) {
  try {
    build_cluster(config);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("FP4 weights are sized with their block and tensor scales", "[quantization][fp4]") {
  QuantHardware blackwell;
  blackwell.fp8 = blackwell.int8 = blackwell.fp4 = true;
  // A 4096 x 4096 matrix. NVFP4: 4 bits per weight, one e4m3 byte per 16
  // along k, two fp32 per-tensor scales: 8,388,608 + 1,048,576 + 8.
  const WeightPrecision nv(Dtype::bf16, quant_scheme(QuantMethod::nvfp4, blackwell));
  CHECK(nv.linear_bytes(4096, 4096) == 9'437'192.0);
  // MXFP4: 4 bits, one e8m0 byte per 32 along k: 8,388,608 + 524,288.
  const WeightPrecision mx(Dtype::bf16, quant_scheme(QuantMethod::mxfp4, blackwell));
  CHECK(mx.linear_bytes(4096, 4096) == 8'912'896.0);
  // k not a multiple of the block: the last block still has its scale.
  CHECK(mx.linear_bytes(1, 33) == 16.5 + 2.0);
  // W4A4 reads its activations in 4 bits plus an e4m3 scale per 16.
  CHECK(nv.linear_input_bytes() == 0.5625);
  CHECK(mx.linear_input_bytes() == 2.0);  // MXFP4 runs with bf16 activations
}

TEST_CASE("vLLM's FP4 spellings, and fp4 is no storage dtype", "[quantization][fp4]") {
  CHECK(parse_quant_method("mxfp4") == QuantMethod::mxfp4);
  CHECK(parse_quant_method("nvfp4") == QuantMethod::nvfp4);
  CHECK(parse_quant_method("modelopt_fp4") == QuantMethod::nvfp4);
  CHECK_THROWS_WITH(parse_dtype("fp4"), Catch::Contains("weight format only"));
  ClusterConfig kv = one_group("llama-3.1-8b", "b200");
  kv.groups.front().kv_dtype = "nvfp4";
  CHECK_THROWS_WITH(build_cluster(kv), Catch::Contains("kv_dtype") && Catch::Contains("weight format only"));
}

TEST_CASE("NVFP4 runs on FP4 tensor cores on B200 and weight-only Marlin on H100", "[quantization][fp4]") {
  const Cluster b200 = build_cluster(quantized("llama-3.1-8b", "b200", "nvfp4"));
  const QuantScheme& q = b200.groups.front().precision.quant;
  CHECK(q.kernel == "w4a4_nvfp4_cutlass");
  CHECK(q.gemm_dtype == Dtype::fp4);
  CHECK_FALSE(q.weight_only);
  // A 4096-token prefill's projections are compute bound: priced at the
  // fp4 peak (9000 TFLOPS) against bf16's 2250, with the same curves.
  const auto dense = ops_of(one_group("llama-3.1-8b", "b200"), prefill(4096));
  const auto fp4 = ops_of(quantized("llama-3.1-8b", "b200", "nvfp4"), prefill(4096));
  const OpCost& up16 = op(dense, OpKind::gate_up_proj);
  const OpCost& up4 = op(fp4, OpKind::gate_up_proj);
  REQUIRE(up16.compute_bound);
  REQUIRE(up4.compute_bound);
  CHECK(up16.time_ns / up4.time_ns == Approx(9000.0 / 2250.0).epsilon(0.02));
  // Attention is not a linear layer: same time.
  CHECK(op(fp4, OpKind::attn_prefill).time_ns == Approx(op(dense, OpKind::attn_prefill).time_ns));

  const Cluster h100 = build_cluster(quantized("llama-3.1-8b", "h100-80gb", "nvfp4"));
  const QuantScheme& w = h100.groups.front().precision.quant;
  CHECK(w.kernel == "w4a16_nvfp4_marlin");
  CHECK(w.weight_only);
  const auto h16 = ops_of(one_group("llama-3.1-8b", "h100-80gb"), prefill(4096));
  const auto h4 = ops_of(quantized("llama-3.1-8b", "h100-80gb", "nvfp4"), prefill(4096));
  // Weight-only: the 16-bit peak plus the dequantisation, never faster when compute bound.
  CHECK(op(h4, OpKind::gate_up_proj).time_ns >= op(h16, OpKind::gate_up_proj).time_ns);
  // Decode at batch 1 reads a quarter of the bytes, and more.
  const auto d16 = ops_of(one_group("llama-3.1-8b", "h100-80gb"), decode_batch(1, 512));
  const auto d4 = ops_of(quantized("llama-3.1-8b", "h100-80gb", "nvfp4"), decode_batch(1, 512));
  CHECK(op(d16, OpKind::gate_up_proj).bytes / op(d4, OpKind::gate_up_proj).bytes > 3.5);
}

TEST_CASE("FP4 formats are refused by name where no kernel runs them", "[quantization][fp4]") {
  const std::string amd = error_of(quantized("llama-3.1-8b", "mi300x", "nvfp4"));
  CHECK(amd.find("nvfp4") != std::string::npos);
  CHECK(amd.find("mi300x") != std::string::npos);
  CHECK(amd.find("CUDA-only") != std::string::npos);
  const std::string cpu = error_of(quantized("tiny", "cpu", "nvfp4"));
  CHECK(cpu.find("GPUs only") != std::string::npos);
  const std::string dense = error_of(quantized("llama-3.1-8b", "b200", "mxfp4"));
  CHECK(dense.find("MoE experts only") != std::string::npos);
  CHECK(dense.find("llama-3.1-8b") != std::string::npos);
}

TEST_CASE("MXFP4 quantises the experts only, weight-only with bf16 activations", "[quantization][fp4]") {
  const Cluster mx = build_cluster(quantized("mixtral-8x7b", "b200", "mxfp4", 2));
  const WeightPrecision& p = mx.groups.front().precision;
  CHECK(p.quant.kernel == "w4a16_mxfp4_flashinfer");
  CHECK(p.quant.weight_only);
  CHECK(build_cluster(quantized("mixtral-8x7b", "h100-80gb", "mxfp4", 2)).groups.front().precision.quant.kernel ==
        "w4a16_mxfp4_marlin");
  CHECK(build_cluster(quantized("mixtral-8x7b", "mi300x", "mxfp4", 2)).groups.front().precision.quant.kernel ==
        "w4a16_mxfp4_triton");
  // The weights: bf16 everywhere but the experts, at 4 bits + 1 byte per 32.
  const ModelDesc m = resolve_model("mixtral-8x7b");
  const double expert_params = 32.0 * 8 * 3 * 4096 * 14336;
  const double expected = 2.0 * (static_cast<double>(param_count(m)) - expert_params) + expert_params * (0.5 + 1.0 / 32);
  CHECK(static_cast<double>(weight_bytes(m, p)) == Approx(expected).epsilon(1e-9));
  // Attention's projections read the same bf16 bytes as unquantised.
  const auto dense = ops_of(one_group("mixtral-8x7b", "b200", 2), decode_batch(4, 512));
  const auto fp4 = ops_of(quantized("mixtral-8x7b", "b200", "mxfp4", 2), decode_batch(4, 512));
  CHECK(op(fp4, OpKind::qkv_proj).bytes == op(dense, OpKind::qkv_proj).bytes);
  CHECK(op(fp4, OpKind::qkv_proj).time_ns == Approx(op(dense, OpKind::qkv_proj).time_ns));
  CHECK(op(dense, OpKind::moe_gate_up_proj).bytes / op(fp4, OpKind::moe_gate_up_proj).bytes > 3.5);
}

TEST_CASE("a checkpoint's quantization_config sets the method, as vLLM reads it", "[quantization][fp4]") {
  const std::string base = R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
    "max_position_embeddings": 32768, "num_local_experts": 8, "num_experts_per_tok": 2)";
  CHECK(parse_model_json(base + R"(, "quantization_config": {"quant_method": "mxfp4"}})", "c", "c").quantization ==
        "mxfp4");
  CHECK(parse_model_json(base + R"(, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}})",
                         "c", "c").quantization == "nvfp4");
  CHECK(parse_model_json(base + "}", "c", "c").quantization.empty());
  CHECK_THROWS_WITH(parse_model_json(base + R"(, "quantization_config": {"quant_method": "bitsandbytes"}})", "c.json", "c"),
                    Catch::Contains("c.json") && Catch::Contains("quantization_config") &&
                        Catch::Contains("bitsandbytes"));
  CHECK_THROWS_WITH(
      parse_model_json(base + R"(, "quantization_config": {"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}})", "c",
                       "c"),
      Catch::Contains("W4A8_AWQ"));
  CHECK(checkpoint_quant_method("modelopt", "FP8") == "fp8");
}
