// The runtime's forward pass against the dense reference, and the engine
// numerics invariants: paged == dense, chunked == one-shot prefill, prefix
// hit == recompute, batch independence, greedy determinism.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>

#include "engine/core/replica.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/prompt_tokens.hpp"
#include "models/model_desc.hpp"
#include "tests/runtime/test_support.hpp"

namespace twin::test {
namespace {

constexpr float kTol = 2e-3f;  // fp32 with different summation order; logits are O(1)

struct Fixture {
  ModelConfig config;
  WeightMap weights;
  std::string dir;
  Fixture(const std::string& name, bool bias = false, bool tied = false, std::int64_t experts = 0,
          const std::string& dtype = "F32")
      : config(tiny_config(bias, tied, experts)), weights(random_weights(config, 7)) {
    dir = write_checkpoint(temp_dir(name), config, weights, dtype);
  }
};

// Prefill `prompt` in one step, then greedy-decode `steps` tokens; at every
// step compare the runner's logits with the reference over the same tokens.
void check_against_reference(const Fixture& f, ModelRunner& runner, std::size_t prompt_len, int steps,
                             float tol = kTol) {
  std::vector<std::int32_t> tokens = some_tokens(prompt_len, 256, 11);
  const auto table = scattered_blocks(32, 64, 5);
  ForwardBatch batch;
  ForwardOutput out;
  add_seq(batch, 1, tokens, 0, static_cast<std::int32_t>(tokens.size()), table);
  for (int step = 0; step <= steps; ++step) {
    runner.forward(batch, out);
    const auto ref = reference_logits(f.config, f.weights, tokens);
    REQUIRE(out.logits.size() == 256);
    INFO("step " << step << " context " << tokens.size());
    CHECK(max_abs_diff(out.logits.data(), ref.back().data(), 256) < tol);
    tokens.push_back(out.sampled.at(0));
    batch.clear();
    add_seq(batch, 1, tokens, static_cast<std::int32_t>(tokens.size()) - 1, 1, table);
  }
}

}  // namespace

TEST_CASE("paged prefill and decode equal the dense reference (llama shape, scattered blocks)") {
  Fixture f("llama");
  auto runner = make_runner(f.config, f.dir);
  check_against_reference(f, *runner, 37, 4);
}

// Llama 3.1's rope_scaling on the tiny model (head_dim 16): with an
// original context of 64 positions, pair 0 keeps its frequency, pairs 1-2
// are blended and the rest stretched 8x, all within the test's 30 positions.
TEST_CASE("llama3 and linear rope_scaling equal the reference") {
  for (const auto& [scaling, type] : {std::pair{RopeScaling::llama3, "llama3"}, std::pair{RopeScaling::linear, "linear"}}) {
    INFO(type);
    Fixture f(std::string("rope_") + type);
    f.config.rope_scaling = scaling;
    f.config.rope_factor = 8.0;
    f.config.rope_low_freq_factor = 1.0;
    f.config.rope_high_freq_factor = 4.0;
    f.config.rope_original_max_position = 64;
    auto runner = make_runner(f.config, f.dir);
    check_against_reference(f, *runner, 27, 3);
  }
}

// Mistral-style sliding window smaller than the prompt: prefill, then
// decodes, each query seeing its last 8 keys only.
TEST_CASE("a sliding-window model equals the reference") {
  Fixture f("window");
  f.config.sliding_window = 8;
  auto runner = make_runner(f.config, f.dir);
  check_against_reference(f, *runner, 21, 3);
}

TEST_CASE("config values the engine does not implement are refused by name: rope_scaling, mlp_bias, hidden_act") {
  const ModelConfig l3 = model_config_from(resolve_model("llama-3.1-8b"));
  CHECK(l3.rope_scaling == RopeScaling::llama3);
  CHECK(rope_config(l3).scaling == RopeScaling::llama3);
  CHECK(rope_config(l3).original_max_position == 8192);
  ModelDesc d = resolve_model("tiny");
  d.rope_scaling.type = "yarn";
  CHECK_THROWS_WITH(model_config_from(d), Catch::Contains("rope_scaling type 'yarn'"));
  // Likewise an MLP the forward pass does not implement.
  ModelDesc biased = resolve_model("tiny");
  biased.mlp_bias = true;
  CHECK_THROWS_WITH(model_config_from(biased), Catch::Contains("mlp_bias"));
  ModelDesc gelu = resolve_model("tiny");
  gelu.hidden_act = "gelu";
  CHECK_THROWS_WITH(model_config_from(gelu), Catch::Contains("hidden_act 'gelu'"));
}

TEST_CASE("qwen2-style QKV bias and tied embeddings equal the reference") {
  Fixture f("qwen", true, true);
  auto runner = make_runner(f.config, f.dir, 64, 1);  // block size 1: token-level KV
  check_against_reference(f, *runner, 20, 2);
}

// Qwen3's q/k norm: every head of Q and K normalised with its own RMS
// before the rotary embedding, through the engine's config.json reader.
TEST_CASE("qwen3-style per-head q/k norm equals the reference, loaded from its config.json") {
  ModelConfig config = tiny_config();
  config.qk_norm = true;
  const WeightMap weights = random_weights(config, 7);
  Fixture f("qwen3");
  f.config = config;
  f.weights = weights;
  f.dir = write_checkpoint(temp_dir("qwen3"), config, weights);
  const ModelDesc desc = resolve_model(f.dir);
  CHECK(desc.qk_norm == QkNorm::per_head);
  CHECK(model_config_from(desc).qk_norm);
  auto runner = make_runner(model_config_from(desc), f.dir);
  check_against_reference(f, *runner, 23, 3);
  // The norm matters: the same weights without it are another model.
  ModelConfig without = config;
  without.qk_norm = false;
  CHECK(max_abs_diff(reference_logits(config, weights, {1, 2, 3}).back().data(),
                     reference_logits(without, weights, {1, 2, 3}).back().data(), 256) > 10 * kTol);
}

TEST_CASE("MoE model types the engine cannot run are refused by name") {
  for (const std::string name : {"qwen3-30b-a3b", "qwen3-235b-a22b"}) {
    CAPTURE(name);
    CHECK_THROWS_WITH(model_config_from(resolve_model(name)),
                      Catch::Contains("model_type qwen3_moe") && Catch::Contains("simulator only"));
  }
  ModelDesc minimax = resolve_model("tiny");
  minimax.model_type = "minimax_m2";
  CHECK_THROWS_WITH(model_config_from(minimax), Catch::Contains("model_type minimax_m2"));
  ModelDesc per_layer = resolve_model("tiny");
  per_layer.qk_norm = QkNorm::per_layer;
  CHECK_THROWS_WITH(model_config_from(per_layer), Catch::Contains("per-layer q/k norm"));
}

TEST_CASE("mixtral-style MoE equals the reference") {
  Fixture f("moe", false, false, 4);
  auto runner = make_runner(f.config, f.dir, 64, 16);
  check_against_reference(f, *runner, 18, 2);
}

TEST_CASE("bf16 and f16 checkpoints load and match the reference on the rounded weights") {
  for (const std::string dtype : {"BF16", "F16"}) {
    Fixture f("half_" + dtype, false, false, 0, dtype);
    Fixture exact("exact_" + dtype);
    // A 16-bit checkpoint against the f32 one of the same weights: the
    // difference is rounding only, so it is small but not zero.
    auto half = make_runner(f.config, f.dir, 64, 4, dtype == "BF16" ? "auto" : "f32");
    auto full = make_runner(exact.config, exact.dir);
    if (dtype == "BF16") CHECK(half->weight_dtype_name() == "bf16");
    const auto tokens = some_tokens(24, 256, 3);
    const auto table = scattered_blocks(8, 64, 9);
    ForwardBatch batch;
    ForwardOutput a, b;
    add_seq(batch, 1, tokens, 0, 24, table);
    half->forward(batch, a);
    full->forward(batch, b);
    const float diff = max_abs_diff(a.logits.data(), b.logits.data(), 256);
    CHECK(diff > 0.0f);  // really the rounded weights
    CHECK(diff < 0.1f);
  }
}

TEST_CASE("chunked prefill equals one-shot prefill") {
  Fixture f("chunked");
  auto runner = make_runner(f.config, f.dir);
  const auto tokens = some_tokens(45, 256, 21);
  const auto table = scattered_blocks(12, 64, 13);
  ForwardBatch batch;
  ForwardOutput one_shot, chunked;
  add_seq(batch, 1, tokens, 0, 45, table);
  runner->forward(batch, one_shot);
  // Chunks that start mid-block and end mid-block; only the last samples.
  const std::vector<std::int32_t> cuts = {0, 5, 6, 19, 32, 45};
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    batch.clear();
    add_seq(batch, 1, tokens, cuts[i], cuts[i + 1] - cuts[i], table, i + 2 == cuts.size());
    runner->forward(batch, chunked);
  }
  REQUIRE(chunked.logits.size() == 256);
  CHECK(max_abs_diff(one_shot.logits.data(), chunked.logits.data(), 256) < 1e-4f);
  CHECK(one_shot.sampled == chunked.sampled);
}

TEST_CASE("a request's logits do not depend on the rest of its batch") {
  Fixture f("batch");
  auto runner = make_runner(f.config, f.dir, 96, 4);
  const auto a = some_tokens(30, 256, 1), b = some_tokens(50, 256, 2), c = some_tokens(9, 256, 3);
  const auto ta = scattered_blocks(96, 96, 4);
  const std::vector<BlockId> table_a(ta.begin(), ta.begin() + 10), table_b(ta.begin() + 10, ta.begin() + 30),
      table_c(ta.begin() + 30, ta.begin() + 40);
  ForwardBatch batch;
  ForwardOutput alone, mixed;
  // Alone: prefill a[0..29) then decode token 29.
  add_seq(batch, 1, a, 0, 29, table_a, false);
  runner->forward(batch, alone);
  batch.clear();
  add_seq(batch, 1, a, 29, 1, table_a);
  runner->forward(batch, alone);
  // Mixed: c's prefill first, then a's decode, then b's chunk, all in one step.
  batch.clear();
  add_seq(batch, 3, c, 0, 9, table_c);
  add_seq(batch, 1, a, 29, 1, table_a);
  add_seq(batch, 2, b, 0, 50, table_b);
  runner->forward(batch, mixed);
  REQUIRE(mixed.logits.size() == 3 * 256);
  CHECK(max_abs_diff(alone.logits.data(), mixed.logits.data() + 256, 256) < 1e-4f);
  CHECK(alone.sampled[0] == mixed.sampled[1]);
}

TEST_CASE("a prefix-cache hit reuses stored KV and gives the logits of recomputing") {
  Fixture f("prefix");
  auto runner = make_runner(f.config, f.dir, 64, 4);
  ExecutorOptions eo;
  eo.keep_logits = true;
  Executor executor(*runner, eo);
  ReplicaConfig rc = replica_preset("vllm");
  rc.kv.num_blocks = 64;
  rc.kv.block_size = 4;
  set_replica_option(rc, "max_model_len", "256");
  Replica replica(rc, 0);

  Request r;
  r.prompt_len = 26;
  r.output_len = 1;
  r.prompt_tokens = some_tokens(26, 256, 17);
  std::vector<std::vector<float>> first_logits;
  Time now = 0;
  for (RequestId id : {1, 2}) {
    Request req = r;
    req.id = id;
    req.arrival = now;
    replica.add(req, now);
    while (replica.has_work()) {
      const StepPlan plan = replica.plan(now);
      REQUIRE(!plan.empty());
      std::int64_t new_tokens = plan.num_batched_tokens();
      const StepResult result = executor.execute(plan, replica);
      if (id == 2) CHECK(new_tokens < 26);  // the hit is not recomputed
      replica.complete(plan, result, ++now);
      first_logits.push_back(executor.last_logits());
    }
    for (const auto& rec : replica.take_finished()) {
      executor.forget(rec.id);
      if (id == 2) CHECK(rec.cached_prompt_tokens == 24);  // 6 full blocks; the last token is computed
    }
  }
  REQUIRE(first_logits.size() == 2);
  CHECK(max_abs_diff(first_logits[0].data(), first_logits[1].data(), 256) < 1e-4f);
  const auto ref = reference_logits(f.config, f.weights, r.prompt_tokens);
  CHECK(max_abs_diff(first_logits[1].data(), ref.back().data(), 256) < kTol);
}

TEST_CASE("greedy decoding is deterministic and sampling with a seed repeats") {
  Fixture f("greedy");
  for (float temperature : {0.0f, 0.8f}) {
    std::vector<std::vector<TokenId>> runs;
    for (int run = 0; run < 2; ++run) {
      auto runner = make_runner(f.config, f.dir, 64, 4);
      ExecutorOptions eo;
      eo.temperature = temperature;
      eo.seed = 3;
      Executor executor(*runner, eo);
      ReplicaConfig rc = replica_preset("vllm");
      rc.kv.num_blocks = 64;
      rc.kv.block_size = 4;
      Replica replica(rc, 0);
      std::vector<TokenId> all;
      for (RequestId id = 0; id < 3; ++id) {
        Request req;
        req.id = id;
        req.prompt_len = 10 + static_cast<std::int32_t>(id) * 7;
        req.output_len = 6;
        materialize_prompt_tokens(req, 256, 5);
        replica.add(req, 0);
      }
      Time now = 0;
      while (replica.has_work()) {
        const StepPlan plan = replica.plan(now);
        REQUIRE(!plan.empty());
        replica.complete(plan, executor.execute(plan, replica), ++now);
        for (const auto& rec : replica.take_finished()) {
          all.insert(all.end(), executor.output_tokens(rec.id)->begin(), executor.output_tokens(rec.id)->end());
          executor.forget(rec.id);
        }
      }
      CHECK(all.size() == 18);
      runs.push_back(all);
    }
    CHECK(runs[0] == runs[1]);
  }
}

TEST_CASE("timed ops: every op of a step gets its time, within the step, and the results do not change") {
  // Dense, MoE, and dense with Qwen3's q/k norm (its own timed op).
  for (const auto& [experts, qk_norm] : {std::pair{std::int64_t{0}, false}, std::pair{std::int64_t{4}, false},
                                         std::pair{std::int64_t{0}, true}}) {
    CAPTURE(experts, qk_norm);
    Fixture f(experts > 0 ? "timed_moe" : "timed", false, false, experts);
    if (qk_norm) {
      f.config.qk_norm = true;
      f.weights = random_weights(f.config, 7);
      f.dir = write_checkpoint(temp_dir("timed_qk_norm"), f.config, f.weights);
    }
    auto runner = make_runner(f.config, f.dir, 64, 4);
    const auto tokens = some_tokens(20, 256, 9);
    const auto table = scattered_blocks(8, 64, 10);
    ForwardBatch batch;
    add_seq(batch, 1, tokens, 0, 20, table);
    ForwardOutput plain, timed;
    runner->forward(batch, plain);
    CHECK(std::all_of(plain.op_ns.begin(), plain.op_ns.end(), [](double v) { return v == 0; }));
    CHECK(runner->device_threads() > 0);  // the CPU backend: validate times its ops

    runner->set_time_ops(true);
    REQUIRE(runner->times_ops());
    const auto start = std::chrono::steady_clock::now();
    runner->forward(batch, timed);
    const double wall = static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    CHECK(timed.sampled == plain.sampled);
    CHECK(timed.logits == plain.logits);
    const auto at = [&](TimedOp op) { return timed.op_ns[static_cast<std::size_t>(op)]; };
    const bool moe = experts > 0;
    for (int k = 0; k < kNumTimedOps; ++k) {
      const auto op = static_cast<TimedOp>(k);
      CAPTURE(kTimedOpNames[static_cast<std::size_t>(k)]);
      const bool dense_only = op == TimedOp::gate_up_proj || op == TimedOp::silu_mul || op == TimedOp::down_proj;
      const bool moe_only = op == TimedOp::moe_router || op == TimedOp::moe_experts;
      if ((moe && dense_only) || (!moe && moe_only) || (op == TimedOp::qk_norm && !qk_norm)) {
        CHECK(at(op) == 0);
      } else {
        CHECK(at(op) > 0);
      }
    }
    double sum = 0;
    for (double v : timed.op_ns) sum += v;
    CHECK(sum <= wall);
    // Every pass starts from zero: the same output object, timing off again.
    runner->set_time_ops(false);
    runner->forward(batch, timed);
    CHECK(std::all_of(timed.op_ns.begin(), timed.op_ns.end(), [](double v) { return v == 0; }));
  }
}

}  // namespace twin::test
