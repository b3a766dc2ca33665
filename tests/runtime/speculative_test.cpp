// Speculative decoding on the engine: proposers (n-gram lookup, a draft
// model) fill the core's lookahead slots and the target verifies them in one
// pass. Greedy output must not change by a single token, whatever proposes.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/core/replica.hpp"
#include "engine/runtime/draft_proposer.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/ngram_proposer.hpp"
#include "engine/runtime/engine.hpp"
#include "models/speculative_config.hpp"
#include "tests/runtime/reference_model.hpp"
#include "tests/runtime/test_support.hpp"

namespace twin::test {
namespace {

struct Generated {
  std::map<RequestId, std::vector<TokenId>> tokens;
  std::int64_t proposed = 0, accepted = 0, preemptions = 0, full_verifications = 0, full_accepted = 0;
  std::int32_t k = 0;
};

std::unique_ptr<ModelRunner> random_runner(const ModelConfig& config, std::int32_t blocks, std::int32_t block_size,
                                           std::int32_t host_blocks = 0) {
  RunnerOptions o;
  o.threads = 2;
  o.seed = 5;
  o.num_blocks = blocks;
  o.block_size = block_size;
  o.num_host_blocks = host_blocks;
  return std::make_unique<ModelRunner>(config, o);
}

// Prompts with repeats in them (so n-gram lookup finds something) and some without.
std::vector<Request> some_requests(std::int32_t vocab) {
  std::vector<Request> out;
  for (std::int32_t i = 0; i < 6; ++i) {
    Request r;
    r.id = i;
    std::vector<std::int32_t> t = some_tokens(static_cast<std::size_t>(9 + 3 * i), vocab, 77u + static_cast<std::uint32_t>(i));
    if (i % 2 == 0) {
      const std::vector<std::int32_t> head(t.begin(), t.begin() + 6);
      t.insert(t.end(), head.begin(), head.end());
    }
    r.prompt_tokens.assign(t.begin(), t.end());
    r.prompt_len = static_cast<std::int32_t>(t.size());
    r.output_len = 12 + 2 * i;
    out.push_back(r);
  }
  return out;
}

// Serves `requests` to the end on a fresh replica, plan by plan.
Generated generate(ModelRunner& runner, ReplicaConfig rc, const std::vector<Request>& requests, Proposer* proposer,
                   std::int32_t k) {
  rc.kv.num_blocks = runner.num_blocks();
  rc.kv.num_host_blocks = runner.num_host_blocks();
  rc.kv.block_size = runner.options().block_size;
  rc.scheduler.num_speculative_tokens = k;
  Replica replica(rc, 0);
  replica.set_record_steps(true);
  Executor executor(runner, ExecutorOptions{}, proposer);
  for (const Request& r : requests) replica.add(r, 0);
  Generated g;
  g.k = k;
  Time now = 0;
  int guard = 0;
  while (replica.has_work()) {
    REQUIRE(++guard < 5000);
    const StepPlan plan = replica.plan(now);
    REQUIRE_FALSE(plan.empty());
    const StepResult result = executor.execute(plan, replica);
    now += kNsPerMs;
    replica.complete(plan, result, now);
    for (const RequestRecord& rec : replica.take_finished()) {
      REQUIRE(rec.outcome == Outcome::finished);
      const std::vector<TokenId>* out = executor.output_tokens(rec.id);
      REQUIRE(out != nullptr);
      REQUIRE(static_cast<std::int32_t>(out->size()) == rec.output_tokens);
      g.tokens[rec.id] = *out;
      g.preemptions += rec.preemptions;
      executor.forget(rec.id);
    }
    for (const StepRecord& s : replica.take_steps()) {
      g.proposed += s.proposed_tokens;
      g.accepted += s.accepted_tokens;
      for (std::size_t i = 0; i < s.lookahead.size(); ++i) {
        if (s.lookahead[i] != k) continue;
        ++g.full_verifications;
        g.full_accepted += s.accepted[i];
      }
    }
  }
  REQUIRE(replica.kv_cache().num_free_blocks() == replica.kv_cache().num_blocks());
  return g;
}

ReplicaConfig base_config(const std::string& setting) {
  ReplicaConfig rc = replica_preset("vllm");
  set_replica_option(rc, "max_model_len", "128");
  if (setting == "chunked prefill") set_replica_option(rc, "max_num_batched_tokens", "16");
  if (setting == "swap") set_replica_option(rc, "preemption", "swap");
  return rc;
}

}  // namespace

TEST_CASE("ngram lookup proposes what followed the latest earlier match", "[speculative]") {
  std::vector<TokenId> out;
  // ... 1 2 3 9 ... 1 2 3 | the latest "1 2 3" is followed by 7.
  const std::vector<TokenId> tokens = {1, 2, 3, 9, 5, 1, 2, 3, 7, 8, 1, 2, 3};
  ngram_propose(tokens, 2, 3, 1, out);
  CHECK(out == std::vector<TokenId>{7, 8});
  // A continuation running into the end repeats the pattern: 4 5 6 4 5 | 6 4 5 6.
  out.clear();
  ngram_propose(std::vector<TokenId>{4, 5, 6, 4, 5}, 4, 2, 1, out);
  CHECK(out == std::vector<TokenId>{6, 4, 5, 6});
  // No match: the last token repeated.
  out.clear();
  ngram_propose(std::vector<TokenId>{1, 2, 3}, 3, 2, 1, out);
  CHECK(out == std::vector<TokenId>{3, 3, 3});
  CHECK_THROWS_AS(NgramProposer(1, 2), UsageError);
}

TEST_CASE("greedy speculative decoding outputs exactly what plain decoding does", "[speculative]") {
  for (const std::int64_t experts : {std::int64_t{0}, std::int64_t{4}}) {
    const ModelConfig target = tiny_config(false, false, experts);
    // The draft: one layer of a dense model of the same shape and seed (it
    // shares the target's embeddings and, for the dense target, layer 0).
    ModelConfig draft = tiny_config();
    draft.num_layers = 1;
    for (const std::string setting : {"plain", "chunked prefill", "recompute", "swap"}) {
      INFO((experts > 0 ? "MoE" : "dense") << " target, " << setting);
      const bool tight = setting == "recompute" || setting == "swap";
      const std::int32_t blocks = tight ? 14 : 96;
      auto runner = random_runner(target, blocks, 4, setting == "swap" ? 64 : 0);
      auto draft_runner = random_runner(draft, blocks, 4, setting == "swap" ? 64 : 0);
      const std::vector<Request> requests = some_requests(static_cast<std::int32_t>(target.vocab_size));
      const ReplicaConfig rc = base_config(setting);
      const Generated plain = generate(*runner, rc, requests, nullptr, 0);
      REQUIRE(plain.tokens.size() == requests.size());
      CHECK(plain.proposed == 0);
      if (tight) CHECK(plain.preemptions > 0);

      NgramProposer ngram(3, 1);
      const Generated by_ngram = generate(*runner, rc, requests, &ngram, 3);
      CHECK(by_ngram.tokens == plain.tokens);
      CHECK(by_ngram.proposed > 0);

      DraftModelProposer by_draft_model(*draft_runner, *runner);
      const Generated by_draft = generate(*runner, rc, requests, &by_draft_model, 4);
      CHECK(by_draft.tokens == plain.tokens);
      CHECK(by_draft.proposed > 0);
      if (tight) CHECK(by_draft.preemptions > 0);
    }
  }
}

TEST_CASE("a draft equal to the target has every proposal accepted: k + 1 tokens per target step", "[speculative]") {
  const ModelConfig target = tiny_config();
  auto runner = random_runner(target, 96, 4);
  auto same = random_runner(target, 96, 4);  // same config, same seed: the same model
  const std::vector<Request> requests = some_requests(static_cast<std::int32_t>(target.vocab_size));
  const ReplicaConfig rc = base_config("plain");
  const Generated plain = generate(*runner, rc, requests, nullptr, 0);
  DraftModelProposer proposer(*same, *runner);
  const Generated g = generate(*runner, rc, requests, &proposer, 3);
  CHECK(g.tokens == plain.tokens);
  REQUIRE(g.proposed > 0);
  CHECK(g.accepted == g.proposed);
  REQUIRE(g.full_verifications > 0);
  // Every verification with the full lookahead produced k + 1 tokens.
  CHECK(g.full_accepted == 3 * g.full_verifications);
}

TEST_CASE("the engine refuses speculation it cannot do, naming the key", "[speculative]") {
  EngineSettings s;
  s.model = "tiny";
  s.replica = replica_preset("vllm");
  set_replica_option(s.replica, "max_model_len", "256");
  s.runner.threads = 1;
  SECTION("temperature above 0") {
    s.speculative = parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":2})", "--speculative-config");
    s.sampling.temperature = 0.7f;
    CHECK_THROWS_WITH(Engine(s), Catch::Contains("--temperature 0"));
  }
  SECTION("a draft with another vocabulary") {
    s.speculative =
        parse_speculative_config(R"({"method":"draft_model","model":"small","num_speculative_tokens":2})", "--speculative-config");
    CHECK_THROWS_WITH(Engine(s), Catch::Contains("vocabulary") && Catch::Contains("small"));
  }
  SECTION("the simulator's keys") {
    s.speculative = parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":2,"acceptance_rate":0.5})",
                                             "--speculative-config");
    CHECK_THROWS_WITH(Engine(s), Catch::Contains("acceptance_rate"));
  }
  SECTION("a draft tree, the simulator's") {
    s.speculative = parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":2,"num_draft_tokens":8})",
                                             "--speculative-config");
    CHECK_THROWS_WITH(Engine(s), Catch::Contains("num_draft_tokens") && Catch::Contains("chain"));
  }
  SECTION("method eagle, the simulator's") {
    s.speculative = parse_speculative_config(R"({"method":"eagle","num_speculative_tokens":2})", "--speculative-config");
    CHECK_THROWS_WITH(Engine(s), Catch::Contains("eagle") && Catch::Contains("simulator"));
  }
  SECTION("method medusa, the simulator's") {
    s.speculative = parse_speculative_config(R"({"method":"medusa","num_speculative_tokens":2})", "--speculative-config");
    CHECK_THROWS_WITH(Engine(s), Catch::Contains("medusa") && Catch::Contains("Medusa heads"));
  }
}

TEST_CASE("speculative config errors name the flag and the key", "[speculative]") {
  const std::string flag = "--speculative-config";
  CHECK_THROWS_WITH(parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":3,"foo":1})", flag),
                    Catch::Contains("--speculative-config") && Catch::Contains("'foo'"));
  CHECK_THROWS_WITH(parse_speculative_config(R"({"method":"eagle9","num_speculative_tokens":3})", flag),
                    Catch::Contains("'method'"));
  CHECK_THROWS_WITH(parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":0})", flag),
                    Catch::Contains("'num_speculative_tokens'"));
  CHECK_THROWS_WITH(parse_speculative_config(R"({"method":"draft_model","num_speculative_tokens":3})", flag),
                    Catch::Contains("'model'"));
  CHECK_THROWS_WITH(parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":"x"})", flag),
                    Catch::Contains("'prompt_lookup_max'"));
  CHECK_THROWS_WITH(parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":3,"acceptance_rate":1.5})", flag),
                    Catch::Contains("'acceptance_rate'"));
  CHECK_THROWS_WITH(parse_speculative_config("{not json", flag), Catch::Contains("--speculative-config"));
  const SpeculativeConfig c = parse_speculative_config(
      R"({"method":"draft_model","model":"tiny","num_speculative_tokens":5,"acceptance_length":3.0})", flag);
  CHECK(c.method == SpeculativeMethod::draft_model);
  CHECK(c.model == "tiny");
  CHECK(c.num_speculative_tokens == 5);
  // tau = 3 tokens per step at k = 5 is alpha ~ 0.70 per position.
  const double alpha = acceptance_rate_for_length(3.0, 5);
  CHECK(expected_tokens_per_step(alpha, 5) == Approx(3.0).epsilon(1e-9));
  CHECK(alpha == Approx(0.7).margin(0.02));
}

}  // namespace twin::test
