// Multi-head latent attention (DeepSeek-V3, Kimi K2): the KV bytes per
// token as the engines cache them, the weights, the step's ops against a
// hand computation of vLLM's MLA paths, and config.json reading.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/step_ops.hpp"

using namespace twin;

namespace {

std::vector<Op> ops_for(const ModelDesc& m, const BatchShape& b, ParallelLayout layout, Dtype w = Dtype::bf16,
                        Dtype kv = Dtype::bf16) {
  std::vector<Op> out;
  step_ops(m, b, layout, w, kv, 0, out);
  return out;
}

std::vector<const Op*> all_of(const std::vector<Op>& ops, OpKind kind) {
  std::vector<const Op*> found;
  for (const auto& op : ops)
    if (op.kind == kind) found.push_back(&op);
  return found;
}

// A small DeepSeek-style config.json with MLA keys, as a JSON object a test
// edits before parsing.
nlohmann::json mla_config() {
  return nlohmann::json::parse(R"({"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 1000,
    "max_position_embeddings": 4096, "q_lora_rank": 96, "kv_lora_rank": 64, "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16, "v_head_dim": 32, "head_dim": 16, "n_routed_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 64, "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16"})");
}

ModelDesc parse(const nlohmann::json& j) { return parse_model_json(j.dump(), "config.json", "m"); }

// A file in a fresh temp folder, removed with it.
struct TempConfig {
  std::filesystem::path dir;
  explicit TempConfig(const nlohmann::json& j) {
    dir = std::filesystem::temp_directory_path() / ("twin_mla_test_" + std::to_string(::getpid())) / "Tiny-MLA";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.json") << j.dump(2);
  }
  ~TempConfig() {
    std::error_code ec;
    std::filesystem::remove_all(dir.parent_path(), ec);
  }
};

}  // namespace

TEST_CASE("DeepSeek-V3 and Kimi K2 cache one latent and rotary key per token and layer", "[mla]") {
  const ModelDesc ds = resolve_model("deepseek-v3");
  REQUIRE(ds.is_mla());
  CHECK(ds.kv_lora_rank == 512);
  CHECK(ds.q_lora_rank == 1536);
  CHECK(ds.qk_nope_head_dim == 128);
  CHECK(ds.qk_rope_head_dim == 64);
  CHECK(ds.v_head_dim == 128);
  CHECK(ds.head_dim == 192);
  // 61 layers x (512 + 64) x 2 bytes; fp8: one byte.
  CHECK(kv_bytes_per_token(ds, Dtype::bf16) == 70'272);
  CHECK(kv_bytes_per_token(ds, Dtype::fp8) == 35'136);
  // Under TP the latent is not split by heads: every GPU caches all of it
  // (vLLM's MLA cache is one 576-wide head per layer on every rank).
  for (int tp : {1, 2, 8, 16})
    CHECK(kv_bytes_per_token_per_gpu(ds, Dtype::bf16, ParallelLayout{tp, 1}, 0) == 70'272);
  // PP splits the layers: 31 and 30.
  CHECK(kv_bytes_per_token_per_gpu(ds, Dtype::fp8, ParallelLayout{8, 2}, 0) == 31 * 576);
  CHECK(kv_bytes_per_token_per_gpu(ds, Dtype::fp8, ParallelLayout{8, 2}, 1) == 30 * 576);

  const ModelDesc kimi = resolve_model("kimi-k2");
  CHECK(kimi.model_type == "kimi_k2");
  CHECK(kimi.num_attention_heads == 64);
  CHECK(kimi.num_local_experts == 384);
  CHECK(kimi.dense_layers() == 1);
  // The heads do not enter the cache: the same 70,272 bytes as DeepSeek-V3.
  CHECK(kv_bytes_per_token(kimi, Dtype::bf16) == 70'272);
}

TEST_CASE("MLA parameters: DeepSeek-V3's 671B (37B active) and Kimi K2's 1T (32B active)", "[mla]") {
  const ModelDesc ds = resolve_model("deepseek-v3");
  // One layer's attention by hand: fused_qkv_a_proj 7168 x (1536 + 512 + 64),
  // q_b_proj 1536 x 128*192, kv_b_proj 512 x 128*(128+128), o_proj
  // 128*128 x 7168, the two latent norms 1536 + 512.
  const std::int64_t attn = 7168LL * 2112 + 1536LL * 24576 + 512LL * 32768 + 16384LL * 7168 + 2048;
  const std::int64_t expert = 3LL * 7168 * 2048;
  const std::int64_t moe_layer = attn + 257 * expert + 256LL * 7168 + 2 * 7168;
  const std::int64_t dense_layer = attn + 3LL * 7168 * 18432 + 2 * 7168;
  const std::int64_t total = 2LL * 129280 * 7168 + 7168 + 3 * dense_layer + 58 * moe_layer;
  CHECK(param_count(ds) == total);
  INFO("DeepSeek-V3: " << param_count(ds) << " parameters, " << active_param_count(ds) << " active");
  // Published: 671B total (685B with the MTP module), 37B activated.
  CHECK(std::abs(static_cast<double>(param_count(ds)) / 671e9 - 1) < 0.005);
  CHECK(std::abs(static_cast<double>(active_param_count(ds)) / 37e9 - 1) < 0.02);
  // One GPU of TP 8: the down-projections and latent norms replicated,
  // q_b_proj, kv_b_proj and o_proj split by heads, as vLLM shards them.
  const std::int64_t replicated_attn = 7168LL * 2112 + 2048;
  const std::int64_t split_attn = 1536LL * 24576 + 512LL * 32768 + 16384LL * 7168;
  const std::int64_t vocab_shard = 129280LL / 8 * 7168;
  const std::int64_t layer_tp8 = replicated_attn + split_attn / 8 + 2 * 7168;
  const std::int64_t params_tp8 = 2 * vocab_shard + 7168 + 61 * layer_tp8 + 3 * (3LL * 7168 * 18432 / 8) +
                                  58 * (257 * (3LL * 7168 * 2048 / 8) + 256LL * 7168);
  CHECK(weight_bytes_per_gpu(ds, WeightPrecision(Dtype::bf16), ParallelLayout{8, 1}, 0) == 2 * params_tp8);
  const ModelDesc kimi = resolve_model("kimi-k2");
  INFO("Kimi K2: " << param_count(kimi) << " parameters, " << active_param_count(kimi) << " active");
  // Published: "1 trillion total parameters, 32 billion activated" (rounded figures).
  CHECK(std::abs(static_cast<double>(param_count(kimi)) / 1.0e12 - 1) < 0.03);
  CHECK(std::abs(static_cast<double>(active_param_count(kimi)) / 32e9 - 1) < 0.03);
}

TEST_CASE("an MLA decode step's ops against a hand computation of vLLM's absorbed path", "[mla]") {
  const ModelDesc ds = resolve_model("deepseek-v3");
  // One decode after 1,000 cached tokens, TP 8 (16 heads per GPU), bf16.
  const auto ops = ops_for(ds, BatchShape{{{1, 1000, true}}}, ParallelLayout{8, 1});
  const auto decode = all_of(ops, OpKind::attn_decode);
  REQUIRE(decode.size() == 1);
  const Op& a = *decode[0];
  const double H = 16, P = 128, R = 64, V = 128, L = 512, keys = 1001;
  // q_nope absorbed into the latent (W_UK), MQA over the 576-wide latent
  // (scores over L + R, values over L), the output taken back by W_UV.
  const double flops = 2 * H * P * L + keys * H * (2 * (L + R) + 2 * L) + 2 * H * L * V;
  const double bytes = (H * P * L + H * P + H * L) * 2      // W_UK in 16 bits, q_nope in, ql_nope out
                       + keys * (L + R) * 2                 // the cached latents, once for all heads
                       + (H * (L + R) + H * L) * 2          // the query in, the latent output out
                       + (H * L * V + H * L + H * V) * 2    // W_UV, its input and output
                       + (L + R) * 2;                       // the new latent written to the cache
  CHECK(a.flops == Approx(flops).epsilon(1e-12));
  CHECK(a.bytes == Approx(bytes).epsilon(1e-12));
  CHECK(a.repeat == 61);
  CHECK(a.n == 16);
  CHECK(a.k == 576);
  // The projections: the fused down-projection whole on every GPU, the
  // query up-projection of 16 heads, o_proj over 16 x v_head_dim.
  const auto qkv = all_of(ops, OpKind::qkv_proj);
  REQUIRE(qkv.size() == 2);
  CHECK((qkv[0]->n == 1536 + 512 + 64 && qkv[0]->k == 7168));
  CHECK((qkv[1]->n == 16 * 192 && qkv[1]->k == 1536));
  const auto o = all_of(ops, OpKind::o_proj);
  REQUIRE(o.size() == 1);
  CHECK((o[0]->n == 7168 && o[0]->k == 16 * 128));
  const auto norm = all_of(ops, OpKind::qk_norm);
  REQUIRE(norm.size() == 1);
  CHECK(norm[0]->n == 1536 + 512);
  CHECK(all_of(ops, OpKind::rotary)[0]->n == 17 * 64);
  // The cache read does not shrink with TP (the latent is replicated); the
  // heads' work does.
  const auto one = ops_for(ds, BatchShape{{{1, 1000, true}}}, ParallelLayout{1, 1});
  const Op& a1 = *all_of(one, OpKind::attn_decode)[0];
  CHECK(a1.flops == Approx(8 * flops).epsilon(1e-12));
  // Against the GQA stand-in it replaced (2 KV heads of 128): the latent
  // read is 576 values per token where two heads' K and V were 512.
  CHECK(a1.bytes > keys * 576 * 2);
}

TEST_CASE("an MLA prefill chunk up-projects its context and new latents and runs MHA over them", "[mla]") {
  const ModelDesc ds = resolve_model("deepseek-v3");
  // 100 new tokens after 50 cached (a chunked prefill's second chunk), TP 1.
  const auto ops = ops_for(ds, BatchShape{{{100, 50, true}}}, ParallelLayout{1, 1});
  const auto prefill = all_of(ops, OpKind::attn_prefill);
  REQUIRE(prefill.size() == 1);
  const double H = 128, P = 128, R = 64, V = 128, L = 512, T = 100, C = 50, rows = 150;
  const double pairs = T * C + T * (T + 1) / 2;
  const double flops = 2 * rows * L * H * (P + V) + pairs * H * (2 * (P + R) + 2 * V);
  const double bytes = H * (P + V) * L * 2                          // kv_b_proj
                       + C * (L + R) * 2 + T * (L + R) * 2          // cached and new latents in
                       + rows * H * (P + V) * 2                     // keys and values out
                       + T * H * (P + R) * 2 + rows * H * (P + R + V) * 2 + T * H * V * 2  // MHA
                       + T * (L + R) * 2;                           // new latents to the cache
  CHECK(prefill[0]->flops == Approx(flops).epsilon(1e-12));
  CHECK(prefill[0]->bytes == Approx(bytes).epsilon(1e-12));
  CHECK(prefill[0]->k == 192);
  CHECK(all_of(ops, OpKind::attn_decode).empty());
}

TEST_CASE("config.json with multi-head latent attention is read, and bad MLA keys name themselves", "[mla]") {
  const ModelDesc m = parse(mla_config());
  CHECK(m.is_mla());
  CHECK(m.kv_lora_rank == 64);
  CHECK(m.q_lora_rank == 96);
  CHECK(m.head_dim == 48);  // qk_nope + qk_rope, not the config's head_dim
  CHECK(m.num_key_value_heads == 8);
  CHECK(kv_bytes_per_token(m, Dtype::bf16) == 4 * (64 + 16) * 2);
  // A Hugging Face folder loads the same; Kimi K2's model type too.
  {
    const TempConfig folder(mla_config());
    const ModelDesc f = resolve_model(folder.dir.string());
    CHECK(f.name == "Tiny-MLA");
    CHECK(f.kv_lora_rank == 64);
  }
  nlohmann::json kimi = mla_config();
  kimi["model_type"] = "kimi_k2";
  CHECK(parse(kimi).is_mla());
  // DeepSeek-V2-Lite: no query latent.
  nlohmann::json lite = mla_config();
  lite["q_lora_rank"] = nullptr;
  const ModelDesc l = parse(lite);
  CHECK(l.q_lora_rank == 0);
  std::vector<Op> ops;
  step_ops(l, BatchShape{{{4, 0, true}}}, ParallelLayout{}, Dtype::bf16, Dtype::bf16, 0, ops);
  CHECK(all_of(ops, OpKind::qkv_proj)[1]->k == 256);  // q_proj from the hidden state

  const auto rejects = [](nlohmann::json j, const std::string& key) {
    CAPTURE(key, j.dump());
    CHECK_THROWS_WITH(parse(j), Catch::Contains("config.json") && Catch::Contains(key));
  };
  for (const char* key : {"qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) {
    nlohmann::json j = mla_config();
    j.erase(key);
    rejects(j, key);
    j[key] = 0;
    rejects(j, key);
  }
  nlohmann::json odd = mla_config();
  odd["qk_rope_head_dim"] = 15;
  rejects(odd, "qk_rope_head_dim");
  nlohmann::json gqa = mla_config();
  gqa["num_key_value_heads"] = 2;
  rejects(gqa, "num_key_value_heads");
  nlohmann::json llama = mla_config();
  llama["model_type"] = "llama";
  rejects(llama, "kv_lora_rank");
  nlohmann::json no_latent = mla_config();
  no_latent.erase("kv_lora_rank");
  rejects(no_latent, "without kv_lora_rank");
  nlohmann::json interleaved = mla_config();
  interleaved["moe_layer_freq"] = 2;
  rejects(interleaved, "moe_layer_freq");
  nlohmann::json unknown = mla_config();
  unknown["model_type"] = "deepseek_v4";
  CHECK_THROWS_WITH(parse(unknown), Catch::Contains("deepseek_v4") && Catch::Contains("kimi_k2"));
}
