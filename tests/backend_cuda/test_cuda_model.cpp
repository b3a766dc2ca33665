// A tiny model end to end on CUDA and on the CPU, same random weights: the
// logits agree to float rounding and greedy decoding picks the same tokens.
// Dense (GQA, bf16 and f32 weights) and MoE, prefill in chunks then decodes.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/runtime/model_runner.hpp"

namespace twin::test {
namespace {

ModelConfig tiny(bool moe) {
  ModelConfig c;
  c.name = moe ? "tiny-moe" : "tiny";
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 300;
  c.max_position_embeddings = 1024;
  c.rope_theta = 10000.0;
  if (moe) {
    c.num_experts = 4;
    c.experts_per_token = 2;
  }
  return c;
}

std::unique_ptr<ModelRunner> runner(const ModelConfig& c, const std::string& backend, const std::string& dtype) {
  RunnerOptions o;
  o.backend = backend;
  o.threads = 2;
  o.seed = 11;
  o.weight_dtype = dtype;
  o.num_blocks = 64;
  o.block_size = 4;
  return std::make_unique<ModelRunner>(c, o);
}

struct Trace {
  std::vector<std::vector<float>> logits;
  std::vector<TokenId> tokens;
};

// Prefill 21 prompt tokens in chunks of 8 / 13 (the first chunk samples
// nothing), then 6 greedy decodes.
Trace generate(ModelRunner& r, std::int32_t vocab) {
  std::vector<TokenId> tokens(21);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>((i * 37 + 5) % vocab);
  std::vector<BlockId> table(16);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<BlockId>((i * 7 + 3) % 64);
  Trace t;
  ForwardBatch batch;
  ForwardOutput out;
  auto step = [&](std::int32_t start, std::int32_t n, bool samples) {
    batch.clear();
    batch.return_logits = true;
    BatchSeq s;
    s.id = 1;
    s.start = start;
    s.num_new = n;
    s.block_table = table;
    s.samples = samples;
    s.token_index = static_cast<std::int64_t>(t.tokens.size());
    batch.seqs.push_back(s);
    batch.tokens.assign(tokens.begin() + start, tokens.begin() + start + n);
    r.forward(batch, out);
    if (samples) {
      t.logits.push_back(out.logits);
      t.tokens.push_back(out.sampled.at(0));
      tokens.push_back(out.sampled.at(0));
    }
  };
  step(0, 8, false);
  step(8, 13, true);
  for (int i = 0; i < 6; ++i) step(static_cast<std::int32_t>(tokens.size()) - 1, 1, true);
  return t;
}

}  // namespace

TEST_CASE("a tiny model gives the cpu's logits and greedy tokens on cuda") {
  for (bool moe : {false, true}) {
    for (const char* dtype : {"f32", "bf16"}) {
      INFO((moe ? "moe " : "dense ") << dtype);
      const ModelConfig c = tiny(moe);
      auto cpu = runner(c, "cpu", dtype);
      auto gpu = runner(c, "cuda", dtype);
      const Trace a = generate(*cpu, static_cast<std::int32_t>(c.vocab_size));
      const Trace b = generate(*gpu, static_cast<std::int32_t>(c.vocab_size));
      REQUIRE(a.logits.size() == b.logits.size());
      // bf16: the GPU also rounds activations to bf16 inside each GEMM.
      const float tol = std::string(dtype) == "f32" ? 1e-3f : 5e-2f;
      for (std::size_t s = 0; s < a.logits.size(); ++s) {
        REQUIRE(a.logits[s].size() == b.logits[s].size());
        float diff = 0.0f;
        for (std::size_t i = 0; i < a.logits[s].size(); ++i) diff = std::max(diff, std::abs(a.logits[s][i] - b.logits[s][i]));
        INFO("step " << s);
        CHECK(diff < tol);
      }
      if (std::string(dtype) == "f32") CHECK(a.tokens == b.tokens);
    }
  }
}

}  // namespace twin::test
