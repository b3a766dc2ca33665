// Step graphs' padding (engine/runtime/step_graph_batch.hpp), checkable
// without a GPU: the buckets, which steps qualify, and that a decode step
// padded as the CUDA graph path pads it gives the real rows the unpadded
// step's logits and tokens, bit for bit, on the CPU backend.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "base/error.hpp"
#include "engine/runtime/model_runner.hpp"
#include "engine/runtime/step_graph_batch.hpp"
#include "tests/runtime/reference_model.hpp"

namespace twin::test {
namespace {

std::unique_ptr<ModelRunner> cpu_runner(bool pad) {
  RunnerOptions o;
  o.threads = 2;
  o.seed = 5;
  o.weight_dtype = "f32";
  o.num_blocks = 40;
  o.block_size = 4;
  o.pad_decode_steps = pad;
  return std::make_unique<ModelRunner>(tiny_config(), o);
}

BatchSeq decode_seq(RequestId id, std::int32_t start, std::span<const BlockId> table) {
  BatchSeq s;
  s.id = id;
  s.start = start;
  s.num_new = 1;
  s.block_table = table;
  s.samples = true;
  s.token_index = start;
  return s;
}

}  // namespace

TEST_CASE("step graph buckets: vLLM's capture sizes and power-of-two contexts") {
  CHECK(graph_rows_bucket(1, 512) == 1);
  CHECK(graph_rows_bucket(2, 512) == 2);
  CHECK(graph_rows_bucket(3, 512) == 4);
  CHECK(graph_rows_bucket(5, 512) == 8);
  CHECK(graph_rows_bucket(9, 512) == 16);
  CHECK(graph_rows_bucket(17, 512) == 24);
  CHECK(graph_rows_bucket(512, 512) == 512);
  CHECK(graph_rows_bucket(513, 512) == 0);
  CHECK(graph_rows_bucket(4, 6) == 4);  // 6 rounds down to 4: no bucket of 8 over max_num_seqs 6
  CHECK(graph_rows_bucket(5, 6) == 0);
  CHECK(graph_rows_bucket(0, 512) == 0);
  CHECK(graph_rows_bucket(1, 0) == 0);
  CHECK(graph_context_bucket(1, 131072) == 1024);
  CHECK(graph_context_bucket(1024, 131072) == 1024);
  CHECK(graph_context_bucket(1025, 131072) == 2048);
  CHECK(graph_context_bucket(5000, 131072) == 8192);
  CHECK(graph_context_bucket(100000, 131072) == 131072);
  CHECK(graph_context_bucket(300, 512) == 512);  // a model shorter than the first bucket
}

TEST_CASE("step graphs take decode-only steps") {
  const std::vector<BlockId> table{3, 4};
  ForwardBatch b;
  CHECK_FALSE(graph_eligible(b));
  b.seqs.push_back(decode_seq(1, 5, table));
  b.seqs.push_back(decode_seq(2, 6, table));
  CHECK(graph_eligible(b));
  b.seqs[1].num_sampled = 2;  // speculative verification
  CHECK_FALSE(graph_eligible(b));
  b.seqs[1].num_sampled = 1;
  b.seqs[1].samples = false;
  CHECK_FALSE(graph_eligible(b));
  b.seqs[1].samples = true;
  b.seqs[1].num_new = 3;  // a prefill chunk
  CHECK_FALSE(graph_eligible(b));
}

TEST_CASE("padding a step appends rows that write nothing and are never sampled first") {
  const std::vector<BlockId> pad{0};
  const std::vector<BlockId> table{7, 9};
  StepRows step;
  step.ids = {11, 12};
  step.positions = {5, 6};
  step.slots = {29, 38};
  step.attention = {{0, 1, 6, table}, {1, 1, 7, table}};
  step.sample_rows = {0, 1};
  pad_step_rows(step, 4, pad);
  REQUIRE(step.ids.size() == 4);
  CHECK(step.ids == std::vector<TokenId>{11, 12, 0, 0});
  CHECK(step.positions == std::vector<std::int32_t>{5, 6, 0, 0});
  CHECK(step.slots == std::vector<std::int64_t>{29, 38, -1, -1});
  CHECK(step.sample_rows == std::vector<std::int32_t>{0, 1, 2, 3});
  REQUIRE(step.attention.size() == 4);
  CHECK(step.attention[2].query_start == 2);
  CHECK(step.attention[3].num_query == 1);
  CHECK(step.attention[3].context_len == 1);
  CHECK(step.attention[3].block_table.size() == 1);
  CHECK(step.attention[3].block_table[0] == 0);
  CHECK(step.attention[1].block_table.data() == table.data());  // real rows untouched
  CHECK_THROWS_AS(pad_step_rows(step, 3, pad), Error);           // fewer rows than the step has
}

TEST_CASE("a decode step padded for a graph gives the real rows the unpadded step's logits and tokens") {
  // Three and then five sequences (padded to 4 and 8 rows), their blocks
  // scattered and block 0 (the padding rows' block) one of them, so a
  // padding row that wrote KV would change a real sequence's next step.
  auto plain = cpu_runner(false);
  auto padded = cpu_runner(true);
  const std::vector<std::vector<BlockId>> tables = {{5, 0, 17}, {9, 3, 21}, {12, 30, 2}, {8, 1, 33}, {26, 14, 6}};
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 5; ++i) {
    std::vector<TokenId> p;
    for (int t = 0; t < 5 + i; ++t) p.push_back(static_cast<TokenId>((t * 31 + i * 17 + 3) % 256));
    prompts.push_back(p);
  }
  ForwardBatch batch;
  ForwardOutput a, b;
  // Prefill each prompt alone (never padded: a prefill is not a decode).
  for (int i = 0; i < 5; ++i) {
    batch.clear();
    BatchSeq s = decode_seq(static_cast<RequestId>(i), 0, tables[static_cast<std::size_t>(i)]);
    s.num_new = static_cast<std::int32_t>(prompts[static_cast<std::size_t>(i)].size());
    s.token_index = 0;
    batch.seqs.push_back(s);
    batch.tokens = prompts[static_cast<std::size_t>(i)];
    plain->forward(batch, a);
    padded->forward(batch, b);
    REQUIRE(a.sampled == b.sampled);
    prompts[static_cast<std::size_t>(i)].push_back(a.sampled[0]);
  }
  for (int step = 0; step < 4; ++step) {
    const int seqs = step < 2 ? 3 : 5;
    batch.clear();
    batch.return_logits = true;
    for (int i = 0; i < seqs; ++i) {
      const auto& p = prompts[static_cast<std::size_t>(i)];
      const auto pos = static_cast<std::int32_t>(p.size()) - 1;
      batch.seqs.push_back(decode_seq(static_cast<RequestId>(i), pos, tables[static_cast<std::size_t>(i)]));
      batch.tokens.push_back(p.back());
    }
    plain->forward(batch, a);
    padded->forward(batch, b);
    INFO("step " << step << " with " << seqs << " sequences");
    REQUIRE(b.sampled.size() == static_cast<std::size_t>(seqs));
    CHECK(a.sampled == b.sampled);
    REQUIRE(a.logits.size() == b.logits.size());
    CHECK(a.logits == b.logits);  // bit for bit: the CPU's decode GEMM is batch-invariant up to 8 rows
    for (int i = 0; i < seqs; ++i) prompts[static_cast<std::size_t>(i)].push_back(a.sampled[static_cast<std::size_t>(i)]);
  }
}

TEST_CASE("cuda graphs on the cpu backend are refused by name") {
  RunnerOptions o;
  o.backend = "cpu";
  o.threads = 1;
  o.seed = 1;
  o.num_blocks = 8;
  o.cuda_graphs = true;
  try {
    ModelRunner r(tiny_config(), o);
    FAIL("accepted");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("--cuda-graphs") != std::string::npos);
  }
  o.backend = "auto";  // no GPU here or there: eager
  RunnerOptions probe = o;
  ModelRunner r(tiny_config(), probe);
  if (r.backend_name() == "cpu") CHECK_FALSE(r.uses_step_graphs());
}

}  // namespace twin::test
