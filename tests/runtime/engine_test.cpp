// The engine's entry point (engine/runtime/engine): one settings struct sizes
// the KV cache from its real dtype, hands the block counts to the replica,
// sizes the scratch for the scheduler's limits, and serves through the
// core's source and sink interfaces.
#include <catch2/catch.hpp>

#include <vector>

#include "base/error.hpp"
#include "engine/core/timeline.hpp"
#include "engine/runtime/model_weights.hpp"
#include "engine/runtime/engine.hpp"
#include "models/model_desc.hpp"
#include "tests/runtime/test_support.hpp"

namespace twin::test {
namespace {

struct Collect final : RecordSink {
  std::vector<RequestRecord> requests;
  std::int64_t steps = 0;
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  void on_step(const StepRecord&) override { ++steps; }
};

EngineSettings tiny_settings() {
  EngineSettings s;
  s.model = "tiny";
  s.replica = replica_preset("vllm");
  set_replica_option(s.replica, "max_model_len", "256");
  s.runner.threads = 1;
  s.runner.seed = 7;
  return s;
}

std::vector<Request> some_requests(int n) {
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    r.arrival = i * kNsPerMs;
    r.prompt_len = 5 + (i * 13) % 40;
    r.output_len = 1 + i % 6;
    out.push_back(r);
  }
  return out;
}

}  // namespace

TEST_CASE("the KV cache dtype: auto is the weights' dtype, vLLM's names are taken, fp8 and unknown names are refused") {
  CHECK(resolve_kv_cache_dtype("auto", "f32") == "f32");
  CHECK(resolve_kv_cache_dtype("auto", "bf16") == "bf16");
  CHECK(resolve_kv_cache_dtype("bfloat16", "f32") == "bf16");
  CHECK(resolve_kv_cache_dtype("fp32", "bf16") == "f32");
  CHECK(resolve_kv_cache_dtype("fp8_e4m3", "bf16") == "fp8_e4m3");
  CHECK(resolve_kv_cache_dtype("fp8", "f32") == "fp8_e4m3");
  CHECK_THROWS_WITH(resolve_kv_cache_dtype("fp8_e5m2", "bf16"), Catch::Contains("--kv-cache-dtype fp8_e5m2") &&
                                                                    Catch::Contains("E4M3 only"));
  CHECK_THROWS_WITH(resolve_kv_cache_dtype("int4", "bf16"),
                    Catch::Contains("--kv-cache-dtype") && Catch::Contains("unknown dtype 'int4'"));
  CHECK(resolve_kv_cache_dtype("float", "bf16") == "f32");
  CHECK_THROWS_WITH(resolve_kv_cache_dtype("half", "bf16"), Catch::Contains("--kv-cache-dtype half"));
  // The weights' flag takes the same vocabulary.
  CHECK(engine_storage_dtype("bfloat16", "--dtype") == "bf16");
  CHECK(engine_storage_dtype("fp32", "--dtype") == "f32");
  CHECK(engine_storage_dtype("auto", "--dtype") == "auto");
  CHECK_THROWS_WITH(engine_storage_dtype("int8", "--dtype"), Catch::Contains("--dtype int8") && Catch::Contains("not implemented"));
  CHECK_THROWS_WITH(engine_storage_dtype("q4", "--dtype"), Catch::Contains("--dtype") && Catch::Contains("'q4'"));
  const ModelConfig m = model_config_from(resolve_model("tiny"));
  CHECK(kv_block_bytes(m, 16, "bf16") * 2 == kv_block_bytes(m, 16, "f32"));
  CHECK(kv_block_bytes(m, 16, "fp8") * 4 == kv_block_bytes(m, 16, "f32"));
}

TEST_CASE("the engine sizes its KV cache from the real KV dtype and the replica takes the runner's block count") {
  EngineSettings f32 = tiny_settings();
  const Engine a(f32);
  const std::int64_t f32_block = a.runner().kv_block_bytes();
  CHECK(a.runner().kv_dtype_name() == "f32");  // random weights are f32: auto follows them
  CHECK(a.replica_config().kv.num_blocks == (std::int64_t{1} << 30) / f32_block);  // the CPU's 1 GiB
  CHECK(a.replica_config().kv.num_blocks == a.runner().num_blocks());
  CHECK(a.config_echo()["kv_cache_dtype"] == "f32");

  EngineSettings half = tiny_settings();
  half.runner.kv_cache_dtype = "bf16";
  half.runner.kv_cache_memory_bytes = 64 * f32_block;
  const Engine b(half);
  CHECK(b.runner().kv_block_bytes() * 2 == f32_block);
  CHECK(b.replica_config().kv.num_blocks == 128);  // the same bytes hold twice the blocks
  CHECK(b.description().find("bf16 KV") != std::string::npos);

  EngineSettings eight = tiny_settings();
  eight.runner.kv_cache_dtype = "fp8";
  eight.runner.kv_cache_memory_bytes = 64 * f32_block;
  const Engine e8(eight);
  CHECK(e8.runner().kv_block_bytes() * 4 == f32_block);
  CHECK(e8.replica_config().kv.num_blocks == 256);  // a quarter of the bytes per block
  CHECK(e8.description().find("fp8_e4m3 KV") != std::string::npos);
  CHECK(e8.config_echo()["kv_cache_dtype"] == "fp8_e4m3");

  EngineSettings fixed = tiny_settings();
  fixed.replica.kv.num_blocks = 40;
  fixed.runner.swap_space_bytes = 10 * f32_block + 1;
  const Engine c(fixed);
  CHECK(c.replica_config().kv.num_blocks == 40);
  CHECK(c.replica_config().kv.num_host_blocks == 10);

  EngineSettings both = fixed;
  both.runner.kv_cache_memory_bytes = 1 << 20;
  CHECK_THROWS_WITH(Engine(both), Catch::Contains("contradict"));
  EngineSettings tiny_kv = tiny_settings();
  tiny_kv.runner.kv_cache_memory_bytes = 100;
  CHECK_THROWS_WITH(Engine(tiny_kv), Catch::Contains("holds no KV block"));
}

TEST_CASE("the engine makes vLLM's start-up check on the cache it sized, and auto lowers max_model_len to what fits") {
  // Random weights are f32, and so is the KV cache (auto).
  const std::int64_t block = kv_block_bytes(model_config_from(resolve_model("tiny")), 16, "f32");
  EngineSettings s = tiny_settings();  // max_model_len 256
  s.runner.kv_cache_memory_bytes = 10 * block + block / 2;  // 10 whole blocks: 160 tokens
  CHECK_THROWS_WITH(Engine(s), Catch::Contains("vLLM would refuse to start") &&
                                   Catch::Contains("models's max seq len (256)") &&
                                   Catch::Contains("the estimated maximum model length is 160"));
  s.max_model_len_auto = true;
  const Engine fitted(s);
  CHECK(fitted.replica_config().scheduler.max_model_len == 160);
  CHECK(fitted.replica_config().kv.max_model_len == 160);
  CHECK(fitted.config_echo()["max_model_len"] == 160);
  // Where it fits, auto changes nothing.
  EngineSettings roomy = tiny_settings();
  roomy.runner.kv_cache_memory_bytes = 64 * block;
  roomy.max_model_len_auto = true;
  CHECK(Engine(roomy).replica_config().scheduler.max_model_len == 256);
  // A block count given by override is taken as given, as vLLM checks the
  // memory before applying it.
  EngineSettings fixed = tiny_settings();
  fixed.replica.kv.num_blocks = 10;
  CHECK(Engine(fixed).replica_config().scheduler.max_model_len == 256);
}

TEST_CASE("the engine's scratch is sized for the scheduler's limits up front and serving does not regrow it") {
  EngineSettings s = tiny_settings();
  set_replica_option(s.replica, "max_num_batched_tokens", "64");
  set_replica_option(s.replica, "max_num_seqs", "8");
  Engine engine(s);
  const std::int64_t before = engine.runner().scratch_bytes();
  CHECK(before > 0);
  VectorSource source(some_requests(20));
  Collect sink;
  DriveOptions options;
  options.asap = true;
  const DriveStats stats = engine.serve(source, sink, options);
  CHECK(stats.unserved == 0);
  CHECK(sink.requests.size() == 20);
  CHECK(engine.runner().scratch_bytes() == before);
}

TEST_CASE("a runner's scratch grows only in the dimension a step needs (more sampled rows do not double the token rows)") {
  const ModelConfig config = tiny_config();
  RunnerOptions sized;
  sized.threads = 1;
  sized.num_blocks = 256;
  sized.block_size = 4;
  sized.max_num_batched_tokens = 128;
  sized.max_num_seqs = 64;
  const std::int64_t bound = ModelRunner(config, sized).scratch_bytes();

  auto runner = make_runner(config, "", 256, 4);
  const auto tokens = some_tokens(64, static_cast<std::int32_t>(config.vocab_size), 3);
  ForwardOutput out;
  {
    ForwardBatch prefill;  // 64 token rows, one sampled
    const std::vector<BlockId> table = scattered_blocks(16, 256, 1);
    add_seq(prefill, 0, tokens, 0, 64, table);
    runner->forward(prefill, out);
  }
  // Then steps of 1..32 sequences of one token each: the sampled rows grow
  // five times while the token rows never exceed 64.
  for (std::int32_t n = 1; n <= 32; n *= 2) {
    ForwardBatch batch;
    std::vector<std::vector<BlockId>> tables;  // the batch holds spans of them
    for (std::int32_t i = 0; i < n; ++i) tables.push_back({static_cast<BlockId>(100 + i)});
    for (std::int32_t i = 0; i < n; ++i) add_seq(batch, i + 1, tokens, 0, 1, tables[static_cast<std::size_t>(i)]);
    runner->forward(batch, out);
    CHECK(out.sampled.size() == static_cast<std::size_t>(n));
  }
  CHECK(runner->scratch_bytes() <= bound);
}

TEST_CASE("the engine serves the same trace twice from the same state, and bf16 and fp8 KV caches serve it too") {
  for (const char* kv : {"f32", "bf16", "fp8"}) {
    CAPTURE(kv);
    EngineSettings s = tiny_settings();
    s.runner.kv_cache_dtype = kv;
    Engine engine(s);
    std::vector<std::vector<RequestRecord>> runs;
    for (int k = 0; k < 2; ++k) {
      VectorSource source(some_requests(12));
      Collect sink;
      DriveOptions options;
      options.asap = true;
      engine.serve(source, sink, options);
      REQUIRE(sink.requests.size() == 12);
      for (const RequestRecord& r : sink.requests) CHECK(r.outcome == Outcome::finished);
      runs.push_back(sink.requests);
    }
    for (std::size_t i = 0; i < runs[0].size(); ++i) {
      CHECK(runs[0][i].id == runs[1][i].id);
      CHECK(runs[0][i].output_tokens == runs[1][i].output_tokens);
    }
  }
}

TEST_CASE("a replayed timeline scales the client's patience with its arrival") {
  Request r;
  r.arrival = 2 * kNsPerSec;
  r.cancel_time = r.arrival + 5 * kNsPerMs;
  Request fast = r;
  replay_faster(fast, 0, 1000.0);
  CHECK(fast.arrival == 2 * kNsPerMs);
  CHECK(fast.cancel_time == 2 * kNsPerMs + 5 * kNsPerUs);
  Request shifted = r;
  replay_faster(shifted, kNsPerSec, 2.0);
  CHECK(shifted.arrival == kNsPerSec / 2);
  CHECK(shifted.cancel_time - shifted.arrival == 5 * kNsPerMs / 2);
  Request burst = r;
  arrive_at_once(burst);
  CHECK(burst.arrival == 0);
  CHECK(burst.cancel_time == 5 * kNsPerMs);
  Request patient;
  patient.arrival = 3 * kNsPerSec;
  replay_faster(patient, 0, 3.0);
  CHECK(patient.cancel_time == kNoTime);
}

TEST_CASE("run --time-scale: a client's patience shrinks with the clock, so a queued request is still cancelled") {
  // One request holds the only sequence slot for 1500 steps; the second
  // arrives 0.2 s in and gives up 5 ms later. Replayed 1000x faster it
  // arrives at 0.2 ms and waits 5 us, far less than 1500 steps take (at
  // least a microsecond each). Before the fix its cancel time stayed at
  // 0.205 s, long after the engine had served it.
  EngineSettings s = tiny_settings();
  set_replica_option(s.replica, "max_model_len", "2048");
  set_replica_option(s.replica, "max_num_seqs", "1");
  Engine engine(s);
  std::vector<Request> trace(2);
  trace[0].id = 0;
  trace[0].prompt_len = 8;
  trace[0].output_len = 1500;
  trace[1].id = 1;
  trace[1].arrival = 200 * kNsPerMs;
  trace[1].cancel_time = trace[1].arrival + 5 * kNsPerMs;
  trace[1].prompt_len = 8;
  trace[1].output_len = 4;
  VectorSource source(trace);
  Collect sink;
  DriveOptions options;
  options.time_scale = 1000.0;
  engine.serve(source, sink, options);
  REQUIRE(sink.requests.size() == 2);
  for (const RequestRecord& r : sink.requests) {
    CHECK(r.outcome == (r.id == 1 ? Outcome::aborted : Outcome::finished));
  }
}

}  // namespace twin::test

namespace twin::test {

TEST_CASE("a stop request ends the run between steps: in-flight requests aborted as interrupted, every record kept") {
  EngineSettings s = tiny_settings();
  Engine engine(s);
  // 10 requests 1 ms apart, then 30 that arrive 1000 s later: the stop after
  // the 6th step comes while some of the first ten are in flight (each needs
  // 30 steps) and before any of the rest can arrive, however slow the
  // machine (the driver polls the stop while it waits for them).
  std::vector<Request> trace = some_requests(40);
  for (Request& r : trace) {
    r.output_len = 30;
    if (r.id >= 10) r.arrival += 1000 * kNsPerSec;
  }
  VectorSource source(trace);
  Collect sink;
  DriveOptions options;
  options.stop = [&] { return sink.steps >= 6; };
  const DriveStats stats = engine.serve(source, sink, options);
  CHECK(stats.stopped);
  CHECK(stats.interrupted > 0);
  CHECK(sink.steps == 6);
  CHECK(static_cast<std::int64_t>(sink.requests.size()) == stats.submitted);  // every submitted request has its record
  CHECK(stats.submitted >= 1);
  CHECK(stats.submitted <= 10);
  CHECK(stats.interrupted == stats.submitted);  // none of them could have finished in 6 steps
  std::int64_t interrupted = 0;
  for (const RequestRecord& r : sink.requests) {
    if (r.outcome == Outcome::aborted) {
      CHECK(r.reason == "interrupted");
      ++interrupted;
    }
  }
  CHECK(interrupted == stats.interrupted);
}

}  // namespace twin::test

namespace twin::test {

TEST_CASE("the engine refuses attention kinds it does not compute, by name") {
  // DeepSeek-V3's multi-head latent attention: never run as grouped-query heads.
  CHECK_THROWS_WITH(model_config_from(resolve_model("deepseek-v3")),
                    Catch::Contains("does not implement multi-head latent attention"));
  ModelDesc dense = resolve_model("tiny");
  dense.kv_lora_rank = 16;
  dense.qk_rope_head_dim = 8;
  CHECK_THROWS_WITH(model_config_from(dense), Catch::Contains("multi-head latent attention"));
  ModelDesc sliding = resolve_model("tiny");
  sliding.sliding_window = 8;
  sliding.layer_attention.assign(static_cast<std::size_t>(sliding.num_hidden_layers), LayerAttention::full);
  sliding.layer_attention[0] = LayerAttention::sliding;
  CHECK_THROWS_WITH(model_config_from(sliding), Catch::Contains("per-layer sliding-window"));
  ModelDesc sinks = resolve_model("tiny");
  sinks.attention_sinks = true;
  CHECK_THROWS_WITH(model_config_from(sinks), Catch::Contains("attention sinks"));
  // Hybrid models' fixed-state layers (both backends read this config).
  CHECK_THROWS_WITH(model_config_from(resolve_model("nemotron-h-8b")),
                    Catch::Contains("does not implement mamba layers"));
  CHECK_THROWS_WITH(model_config_from(resolve_model("qwen3-next-80b-a3b")),
                    Catch::Contains("does not implement linear layers"));
  CHECK_THROWS_WITH(model_config_from(resolve_model("llama-4-scout")), Catch::Contains("per-layer MLP kinds"));
}

}  // namespace twin::test
