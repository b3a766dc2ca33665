#include "engine/core/replica_overrides.hpp"

#include <charconv>

namespace twin {

bool ReplicaOverrides::empty() const { return override_options(*this).empty(); }

void apply_overrides(ReplicaConfig& c, const ReplicaOverrides& o) {
  if (o.max_model_len) c.scheduler.max_model_len = c.kv.max_model_len = *o.max_model_len;
  if (o.max_num_batched_tokens) c.scheduler.max_num_batched_tokens = *o.max_num_batched_tokens;
  if (o.max_num_seqs) c.scheduler.max_num_seqs = *o.max_num_seqs;
  if (o.block_size) c.kv.block_size = *o.block_size;
  if (o.max_queued_requests) c.scheduler.max_queued_requests = *o.max_queued_requests;
  if (o.max_queue_time_ms) c.scheduler.max_queue_time = from_millis(*o.max_queue_time_ms);
  if (o.enable_prefix_caching) c.kv.enable_prefix_caching = *o.enable_prefix_caching;
  if (o.enable_chunked_prefill) c.scheduler.enable_chunked_prefill = *o.enable_chunked_prefill;
  if (o.stop_at_eos) c.scheduler.stop_at_eos = *o.stop_at_eos;
  if (o.order) c.scheduler.order = *o.order;
  if (o.victim) c.scheduler.victim = *o.victim;
  if (o.num_gpu_blocks) c.kv.num_blocks = *o.num_gpu_blocks;
  for (const auto& [key, value] : o.options) set_replica_option(c, key, value);
}

OptionList override_options(const ReplicaOverrides& o) {
  OptionList out;
  auto integer = [&](const char* key, const std::optional<std::int32_t>& v) {
    if (v) out.emplace_back(key, std::to_string(*v));
  };
  auto boolean = [&](const char* key, const std::optional<bool>& v) {
    if (v) out.emplace_back(key, *v ? "true" : "false");
  };
  integer("max_model_len", o.max_model_len);
  integer("max_num_batched_tokens", o.max_num_batched_tokens);
  integer("max_num_seqs", o.max_num_seqs);
  integer("block_size", o.block_size);
  integer("max_queued_requests", o.max_queued_requests);
  if (o.max_queue_time_ms) {
    // Shortest round-trip form, so the text reads back as the same number.
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, *o.max_queue_time_ms);
    out.emplace_back("max_queue_time_ms", std::string(buf, res.ptr));
  }
  boolean("enable_prefix_caching", o.enable_prefix_caching);
  boolean("enable_chunked_prefill", o.enable_chunked_prefill);
  boolean("stop_at_eos", o.stop_at_eos);
  if (o.order) out.emplace_back("order", *o.order);
  if (o.victim) out.emplace_back("victim", *o.victim);
  integer("num_gpu_blocks", o.num_gpu_blocks);
  for (const auto& kv : o.options) out.push_back(kv);
  return out;
}

}  // namespace twin
