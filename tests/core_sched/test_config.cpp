#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/scheduler_config.hpp"

namespace twin {

TEST_CASE("presets set scheduler and KV knobs", "[config]") {
  const auto vllm = replica_preset("vllm");
  CHECK(vllm.scheduler.enable_chunked_prefill);
  CHECK(vllm.scheduler.decode_first);
  CHECK(vllm.scheduler.max_num_batched_tokens == 0);  // unset, as vLLM's None
  CHECK(effective_token_budget(vllm.scheduler) == 8192);
  CHECK(vllm.kv.block_size == 16);
  CHECK(vllm.kv.enable_prefix_caching);
  CHECK(effective_token_budget(replica_preset("sarathi").scheduler) == 512);
  const auto orca = replica_preset("orca");
  CHECK_FALSE(orca.scheduler.enable_chunked_prefill);
  CHECK_FALSE(orca.scheduler.decode_first);
  CHECK(effective_token_budget(orca.scheduler) == orca.scheduler.max_model_len);
  CHECK(replica_preset("static").scheduler.batching == "static");
  CHECK(replica_preset("dynamic").scheduler.batching == "dynamic");
  CHECK(replica_preset("lightllm").kv.block_size == 1);
  // vLLM v0's default scheduler: orca's algorithm (whole prompts, prefills
  // first, no mixing, budget max(max_model_len, 2048)) with v0's 1% watermark.
  const auto v0 = replica_preset("vllm-v0");
  CHECK_FALSE(v0.scheduler.enable_chunked_prefill);
  CHECK_FALSE(v0.scheduler.decode_first);
  CHECK(v0.scheduler.max_num_batched_tokens == 0);
  CHECK(v0.scheduler.max_num_seqs == 256);
  CHECK(v0.scheduler.preemption == PreemptionMode::recompute);
  CHECK(v0.scheduler.victim == "newest");
  CHECK(v0.kv.block_size == 16);
  CHECK_FALSE(v0.kv.enable_prefix_caching);
  CHECK(v0.kv.watermark == 0.01);
  auto short_context = v0.scheduler;
  short_context.max_model_len = 1024;
  CHECK(effective_token_budget(short_context) == 2048);
  CHECK(replica_preset_names().size() == 9);
  for (const auto& name : replica_preset_names()) {
    auto c = replica_preset(name);
    c.kv.num_blocks = 10;
    CHECK_NOTHROW(validate(c));
  }
}

TEST_CASE("unknown preset lists the known ones", "[config]") {
  try {
    replica_preset("vllm2");
    FAIL("no throw");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("sarathi") != std::string::npos);
  }
}

TEST_CASE("options are set key by key - bad ones name the key", "[config]") {
  auto c = replica_preset("vllm");
  set_replica_option(c, "max_num_seqs", "7");
  set_replica_option(c, "order", "longest_prefix");
  set_replica_option(c, "preemption", "swap");
  set_replica_option(c, "victim", "oldest");
  set_replica_option(c, "batching", "dynamic");
  set_replica_option(c, "batch_timeout_ms", "2.5");
  set_replica_option(c, "length_bucket_bounds", "10,20");
  set_replica_option(c, "block_size", "32");
  set_replica_option(c, "num_gpu_blocks", "100");
  set_replica_option(c, "watermark", "0.01");
  set_replica_option(c, "num_host_blocks", "50");
  set_replica_option(c, "enable_prefix_caching", "false");
  set_replica_option(c, "max_model_len", "4096");
  set_replica_option(c, "max_plans_in_flight", "4");
  CHECK(c.scheduler.max_num_seqs == 7);
  CHECK(c.scheduler.order == "longest_prefix");
  CHECK(c.scheduler.preemption == PreemptionMode::swap);
  CHECK(c.scheduler.victim == "oldest");
  CHECK(c.scheduler.batch_timeout == from_millis(2.5));
  CHECK(c.scheduler.length_bucket_bounds == std::vector<std::int32_t>{10, 20});
  CHECK(c.kv.block_size == 32);
  CHECK(c.kv.num_blocks == 100);
  CHECK(c.kv.num_host_blocks == 50);
  CHECK_FALSE(c.kv.enable_prefix_caching);
  CHECK(c.kv.max_model_len == 4096);
  CHECK(c.max_plans_in_flight == 4);

  auto message = [&](const char* key, const char* value) {
    try {
      set_replica_option(c, key, value);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no throw");
  };
  CHECK(message("max_num_seqz", "1").find("max_num_seqs") != std::string::npos);  // lists known keys
  CHECK(message("max_num_seqs", "-1").find("max_num_seqs") != std::string::npos);
  CHECK(message("order", "lifo").find("fcfs") != std::string::npos);
  CHECK(message("block_size", "1000").find("block_size") != std::string::npos);
  CHECK(message("watermark", "1.5").find("watermark") != std::string::npos);
  CHECK(message("enable_chunked_prefill", "maybe").find("enable_chunked_prefill") != std::string::npos);
  CHECK(message("length_bucket_bounds", "20,10").find("length_bucket_bounds") != std::string::npos);
}

TEST_CASE("contradictory knobs are refused", "[config]") {
  auto c = replica_preset("vllm");
  c.kv.num_blocks = 10;
  c.scheduler.enable_chunked_prefill = false;
  c.scheduler.max_num_batched_tokens = 512;  // below max_model_len without chunking
  CHECK_THROWS_AS(validate(c), UsageError);
  c.scheduler.max_num_batched_tokens = 0;
  CHECK_NOTHROW(validate(c));
  c.kv.num_blocks = 0;
  CHECK_THROWS_AS(Replica(c, 0), UsageError);
}

TEST_CASE("chunked prefill off: an unset budget follows vLLM's rule, a given one must cover max_model_len", "[config]") {
  // vLLM's SchedulerConfig: without chunked prefill an unset budget is
  // max(max_model_len, 2048), whatever the chunked default was.
  auto c = replica_preset("vllm");
  c.scheduler.enable_chunked_prefill = false;
  CHECK(effective_token_budget(c.scheduler) == c.scheduler.max_model_len);
  CHECK_NOTHROW(validate(c.scheduler));
  c.scheduler.max_model_len = 1000;
  CHECK(effective_token_budget(c.scheduler) == 2048);
  auto sarathi = replica_preset("sarathi");
  sarathi.scheduler.enable_chunked_prefill = false;
  CHECK(effective_token_budget(sarathi.scheduler) == sarathi.scheduler.max_model_len);
  // An explicit budget below max_model_len stays an error naming both flags.
  c.scheduler.max_num_batched_tokens = 512;
  CHECK_THROWS_WITH(validate(c.scheduler), Catch::Contains("--max-num-batched-tokens") &&
                                               Catch::Contains("--max-model-len") && Catch::Contains("512") &&
                                               Catch::Contains("1000"));
  c.scheduler.max_num_batched_tokens = 1000;
  CHECK_NOTHROW(validate(c.scheduler));
}

}  // namespace twin
