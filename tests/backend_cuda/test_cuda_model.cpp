// A tiny model end to end on CUDA and on the CPU, same random weights: the
// logits agree to float rounding and greedy decoding picks the same tokens.
// Dense (GQA, bf16 and f32 weights) and MoE, prefill in chunks then decodes.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/runtime/model_runner.hpp"
#include "tests/backend_cuda/cuda_test_util.hpp"

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

namespace {

// Decode steps of `seqs` sequences after their prompts, the same on every
// runner: prompts of 9..(9 + seqs) tokens, one sequence past 1,024 tokens
// when `long_one` (the second context bucket).
struct DecodeRun {
  std::vector<std::vector<float>> logits;  // per step, the batch's rows
  std::vector<TokenId> tokens;
};

DecodeRun decode_steps(ModelRunner& r, const std::vector<int>& batch_sizes, bool long_one) {
  constexpr int kSeqs = 9;
  std::vector<std::vector<TokenId>> prompts(kSeqs);
  std::vector<std::vector<BlockId>> tables(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    const int len = (long_one && i == 0) ? 1100 : 9 + i;
    for (int t = 0; t < len; ++t) prompts[i].push_back(static_cast<TokenId>((t * 37 + i * 11 + 5) % 300));
    for (int b = 0; b < 80; ++b) tables[i].push_back(static_cast<BlockId>(i * 80 + b));
  }
  DecodeRun run;
  ForwardBatch batch;
  ForwardOutput out;
  for (int i = 0; i < kSeqs; ++i) {
    batch.clear();
    BatchSeq s;
    s.id = static_cast<RequestId>(i);
    s.num_new = static_cast<std::int32_t>(prompts[i].size());
    s.block_table = tables[i];
    s.samples = true;
    batch.seqs.push_back(s);
    batch.tokens = prompts[i];
    r.forward(batch, out);
    prompts[i].push_back(out.sampled.at(0));
  }
  for (int n : batch_sizes) {
    batch.clear();
    batch.return_logits = true;
    for (int i = 0; i < n; ++i) {
      BatchSeq s;
      s.id = static_cast<RequestId>(i);
      s.start = static_cast<std::int32_t>(prompts[i].size()) - 1;
      s.num_new = 1;
      s.block_table = tables[i];
      s.samples = true;
      s.token_index = s.start;
      batch.seqs.push_back(s);
      batch.tokens.push_back(prompts[i].back());
    }
    r.forward(batch, out);
    run.logits.push_back(out.logits);
    for (int i = 0; i < n; ++i) {
      prompts[i].push_back(out.sampled.at(static_cast<std::size_t>(i)));
      run.tokens.push_back(out.sampled.at(static_cast<std::size_t>(i)));
    }
  }
  return run;
}

std::unique_ptr<ModelRunner> graph_runner(const std::string& dtype, bool graphs) {
  ModelConfig c = tiny(false);
  c.max_position_embeddings = 4096;
  RunnerOptions o;
  o.backend = "cuda";
  o.seed = 11;
  o.weight_dtype = dtype;
  o.num_blocks = 9 * 80;
  o.block_size = 16;
  o.cuda_graphs = graphs;
  o.max_num_seqs = 16;
  return std::make_unique<ModelRunner>(c, o);
}

}  // namespace

TEST_CASE("decode steps through cuda graphs give the eager steps' logits and tokens") {
  for (const char* dtype : {"f32", "bf16"}) {
    for (bool long_one : {false, true}) {
      INFO(dtype << (long_one ? ", one context past 1024" : ""));
      auto eager = graph_runner(dtype, false);
      auto graphs = graph_runner(dtype, true);
      REQUIRE(graphs->uses_step_graphs());
      // 3 -> 4 rows, 5 -> 8, again (replays), 2, 9 -> 16, 8, 3 again.
      const std::vector<int> sizes = {3, 5, 5, 2, 9, 8, 3, 5};
      const DecodeRun a = decode_steps(*eager, sizes, long_one);
      const DecodeRun b = decode_steps(*graphs, sizes, long_one);
      const StepGraphStats& st = graphs->step_graph_stats();
      INFO("recorded " << st.recorded << ", replays " << st.replays << ", failed " << st.failed << ": "
                       << st.first_failure);
      CHECK(st.failed == 0);
      CHECK(st.recorded >= 5);
      CHECK(st.replays >= 2);
      REQUIRE(a.logits.size() == b.logits.size());
      // Padded rows change cuBLAS's row count and the graph's attention
      // splits for its bucket's context: rounding, not results.
      const double tol = std::string(dtype) == "f32" ? 1e-4 : 2e-2;
      for (std::size_t s = 0; s < a.logits.size(); ++s) {
        INFO("step " << s);
        CHECK(max_rel_diff(b.logits[s], a.logits[s]) < tol);
      }
      if (std::string(dtype) == "f32") CHECK(a.tokens == b.tokens);
    }
  }
}

TEST_CASE("a cuda graph's replay of a step equals the warm pass that preceded its recording, bit for bit") {
  // The same decode step twice (it rewrites the same KV): the first runs
  // eagerly in the graph's layout and records, the second replays.
  auto r = graph_runner("bf16", true);
  std::vector<BlockId> table;
  for (int b = 0; b < 80; ++b) table.push_back(static_cast<BlockId>(b));
  std::vector<TokenId> prompt;
  for (int t = 0; t < 40; ++t) prompt.push_back(static_cast<TokenId>((t * 13 + 7) % 300));
  ForwardBatch batch;
  ForwardOutput out;
  BatchSeq s;
  s.id = 1;
  s.num_new = static_cast<std::int32_t>(prompt.size());
  s.block_table = table;
  s.samples = true;
  batch.seqs.push_back(s);
  batch.tokens = prompt;
  r->forward(batch, out);
  batch.clear();
  batch.return_logits = true;
  s.start = static_cast<std::int32_t>(prompt.size());
  s.num_new = 1;
  s.token_index = s.start;
  batch.seqs.push_back(s);
  batch.tokens = {out.sampled.at(0)};
  r->forward(batch, out);
  const std::vector<float> warm = out.logits;
  const TokenId warm_token = out.sampled.at(0);
  REQUIRE(r->step_graph_stats().recorded == 1);
  r->forward(batch, out);
  CHECK(r->step_graph_stats().replays == 1);
  CHECK(out.logits == warm);
  CHECK(out.sampled.at(0) == warm_token);
}

}  // namespace twin::test
