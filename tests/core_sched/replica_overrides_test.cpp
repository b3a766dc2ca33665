// Typed overrides: each given field lands on the replica's config, --set
// options come last and win, and the text form reads back to the same config.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "engine/core/replica_overrides.hpp"

namespace twin {

TEST_CASE("replica overrides set the fields given, then the options, and leave the rest") {
  ReplicaConfig c = replica_preset("vllm");
  const ReplicaConfig before = c;
  ReplicaOverrides o;
  o.max_model_len = 4096;
  o.max_num_seqs = 8;
  o.block_size = 32;
  o.max_queue_time_ms = 1.5;
  o.enable_prefix_caching = false;
  o.order = "priority";
  o.victim = "lowest_priority";
  o.num_gpu_blocks = 100;
  o.options = {{"max_num_seqs", "16"}, {"preemption", "swap"}};
  apply_overrides(c, o);
  CHECK(c.scheduler.max_model_len == 4096);
  CHECK(c.kv.max_model_len == 4096);
  CHECK(c.scheduler.max_num_seqs == 16);  // the --set after the named flag
  CHECK(c.kv.block_size == 32);
  CHECK(c.scheduler.max_queue_time == 1'500'000);
  CHECK_FALSE(c.kv.enable_prefix_caching);
  CHECK(c.scheduler.order == "priority");
  CHECK(c.scheduler.victim == "lowest_priority");
  CHECK(c.scheduler.preemption == PreemptionMode::swap);
  CHECK(c.kv.num_blocks == 100);
  // Untouched knobs keep the preset's values.
  CHECK(c.scheduler.max_num_batched_tokens == before.scheduler.max_num_batched_tokens);
  CHECK(c.scheduler.enable_chunked_prefill == before.scheduler.enable_chunked_prefill);
  CHECK(ReplicaOverrides{}.empty());
  CHECK_FALSE(o.empty());
}

TEST_CASE("replica overrides as text read back through set_replica_option to the same config") {
  ReplicaOverrides o;
  o.max_num_batched_tokens = 0;  // auto
  o.max_queued_requests = 7;
  o.max_queue_time_ms = 0.1;
  o.enable_chunked_prefill = false;
  o.stop_at_eos = true;
  o.order = "fcfs";
  o.victim = "newest";
  ReplicaConfig typed = replica_preset("sarathi"), text = replica_preset("sarathi");
  apply_overrides(typed, o);
  for (const auto& [key, value] : override_options(o)) set_replica_option(text, key, value);
  CHECK(text.scheduler.max_num_batched_tokens == typed.scheduler.max_num_batched_tokens);
  CHECK(text.scheduler.max_queued_requests == typed.scheduler.max_queued_requests);
  CHECK(text.scheduler.max_queue_time == typed.scheduler.max_queue_time);
  CHECK(text.scheduler.enable_chunked_prefill == typed.scheduler.enable_chunked_prefill);
  CHECK(text.scheduler.stop_at_eos == typed.scheduler.stop_at_eos);
  CHECK(text.scheduler.order == typed.scheduler.order);
  CHECK(text.scheduler.victim == typed.scheduler.victim);
}

TEST_CASE("validate refuses counts above the core's limit whichever way they were set") {
  ReplicaConfig c = replica_preset("vllm");
  c.kv.num_blocks = 16;
  ReplicaOverrides o;
  o.max_num_seqs = kMaxKnobCount + 1;
  apply_overrides(c, o);
  CHECK_THROWS_AS(validate(c), UsageError);
  CHECK_THROWS_AS(set_replica_option(c, "max_num_seqs", std::to_string(kMaxKnobCount + 1LL)), UsageError);
}

}  // namespace twin
