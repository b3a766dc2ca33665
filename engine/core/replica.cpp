#include "engine/core/replica.hpp"

#include <algorithm>
#include <charconv>
#include <string>

#include "base/error.hpp"
#include "engine/core/option_values.hpp"
#include "engine/core/scheduler.hpp"

namespace twin {

// ---- presets and options ------------------------------------------------------

std::vector<std::string> replica_preset_names() { return scheduler_preset_names(); }

ReplicaConfig replica_preset(std::string_view name) {
  ReplicaConfig c;
  c.scheduler = scheduler_preset(name);  // throws UsageError for unknown names
  c.kv.block_size = 16;
  // vLLM v1 turns APC on by default, SGLang its radix cache, TensorRT-LLM
  // KV block reuse; the others predate prefix caching.
  c.kv.enable_prefix_caching = name == "vllm" || name == "sglang" || name == "trtllm";
  if (name == "lightllm") c.kv.block_size = 1;  // token-level KV (TokenAttention)
  if (name == "sglang") c.kv.block_size = 1;    // page_size 1: the radix tree matches token by token
  if (name == "trtllm") c.kv.block_size = 32;   // KvCacheConfig tokens_per_block
  // vLLM and SGLang capture GPU graphs by default; TensorRT-LLM's
  // graph config pads nothing by default (docs/engines.md).
  if (name == "vllm" || name == "sglang") c.graph_capture_max_tokens = -1;
  // vLLM, SGLang and TensorRT-LLM all-reduce small TP messages with their
  // own peer-memory kernels (docs/engines.md, "TP all-reduce").
  c.custom_all_reduce = name == "vllm" || name == "vllm-v0" || name == "sglang" || name == "trtllm";
  // vLLM v0's BlockSpaceManager keeps 1% of the blocks free at admission
  // (CacheConfig watermark 0.01) so running requests can grow.
  if (name == "vllm-v0") c.kv.watermark = 0.01;
  return c;
}

namespace {

const char* const kKvKeys[] = {"block_size", "enable_prefix_caching", "num_gpu_blocks", "num_blocks",
                               "watermark", "num_host_blocks", "contiguous", "max_plans_in_flight",
                               "cache_generated_blocks", "graph_capture_max_tokens", "custom_all_reduce",
                               "mixed_attention_rows"};

constexpr std::string_view kWhat = "replica option";

std::int32_t parse_int(std::string_view key, std::string_view value, std::int32_t lo, std::int32_t hi) {
  return static_cast<std::int32_t>(option_int(kWhat, key, value, lo, hi));
}
bool parse_bool(std::string_view key, std::string_view value) { return option_bool(kWhat, key, value); }

}  // namespace

void set_replica_option(ReplicaConfig& c, std::string_view key, std::string_view value) {
  constexpr std::int32_t kMax = kMaxKnobCount;
  if (key == "block_size") {
    c.kv.block_size = parse_int(key, value, 1, 512);
  } else if (key == "enable_prefix_caching") {
    c.kv.enable_prefix_caching = parse_bool(key, value);
  } else if (key == "graph_capture_max_tokens") {
    c.graph_capture_max_tokens = parse_int(key, value, -1, kMax);
  } else if (key == "custom_all_reduce") {
    c.custom_all_reduce = parse_bool(key, value);
  } else if (key == "mixed_attention_rows") {
    c.mixed_attention_rows = parse_int(key, value, -1, 1024);
  } else if (key == "cache_generated_blocks") {
    c.kv.cache_generated_blocks = parse_bool(key, value);
  } else if (key == "num_gpu_blocks" || key == "num_blocks") {
    c.kv.num_blocks = parse_int(key, value, 1, kMax);
  } else if (key == "watermark") {
    double w = 0;
    const auto* end = value.data() + value.size();
    auto [ptr, ec] = std::from_chars(value.data(), end, w);
    if (value.empty() || ec != std::errc{} || ptr != end || !(w >= 0.0 && w < 1.0)) {
      throw UsageError("replica option 'watermark': bad value '" + excerpt(value) +
                       "', expected a fraction in [0, 1)");
    }
    c.kv.watermark = w;
  } else if (key == "num_host_blocks") {
    c.kv.num_host_blocks = parse_int(key, value, 0, kMax);
  } else if (key == "contiguous") {
    c.kv.contiguous = parse_bool(key, value);
  } else if (key == "max_plans_in_flight") {
    c.max_plans_in_flight = parse_int(key, value, 1, 1024);
  } else {
    bool known = false;
    for (const auto& k : scheduler_option_keys()) known = known || key == k || key == "batch_timeout" || key == "max_waiting_requests";
    if (!known) {
      std::string names;
      for (const auto& k : scheduler_option_keys()) names += k + ", ";
      for (const char* k : kKvKeys) names += std::string(k) + (k == kKvKeys[std::size(kKvKeys) - 1] ? "" : ", ");
      // A short quote: the caller's message names the key in full, and the
      // list of known ones is what helps.
      throw UsageError("unknown replica option '" + excerpt(key, 40) + "': known options are " + names);
    }
    set_scheduler_option(c.scheduler, key, value);
    if (key == "max_model_len") c.kv.max_model_len = c.scheduler.max_model_len;
  }
}

void validate(const ReplicaConfig& c) {
  validate(c.scheduler);
  if (c.max_plans_in_flight < 1) throw UsageError("replica config: max_plans_in_flight must be at least 1");
  if (c.kv.block_size < 1 || c.kv.block_size > 512) throw UsageError("replica config: block_size must be 1 to 512");
  if (c.kv.num_blocks > kMaxKnobCount) {
    throw UsageError("replica config: num_gpu_blocks must be at most " + std::to_string(kMaxKnobCount));
  }
  if (c.kv.num_blocks < 1) {
    throw UsageError("replica config: num_gpu_blocks must be set (at least 1 KV block), got " +
                     std::to_string(c.kv.num_blocks));
  }
  if (!c.kv.tiers.empty() && (!c.kv.enable_prefix_caching || c.kv.contiguous)) {
    throw UsageError("replica config: KV tiers below HBM keep prefix-cached blocks: they need enable_prefix_caching "
                     "on and contiguous off");
  }
  for (const KvTierConfig& t : c.kv.tiers) {
    if (t.capacity_blocks < 1) {
      throw UsageError("replica config: KV tier '" + t.name + "' must hold at least 1 block");
    }
  }
}

// ---- Replica: a thin face over Scheduler -------------------------------------

Replica::Replica(const ReplicaConfig& config, std::int32_t index) : impl_(std::make_unique<Scheduler>(config, index)) {}
Replica::~Replica() = default;
Replica::Replica(Replica&&) noexcept = default;
Replica& Replica::operator=(Replica&&) noexcept = default;

std::int32_t Replica::index() const { return impl_->index(); }
const ReplicaConfig& Replica::config() const { return impl_->config(); }
void Replica::add(Request request, Time now) { impl_->add(std::move(request), now); }
std::optional<std::string> Replica::rejection_reason(const Request& req) const { return impl_->rejection_reason(req); }
std::optional<std::string> Replica::admission_reason(const Request& req) const { return impl_->admission_reason(req); }
void Replica::abort(RequestId id, Time now, const std::string& reason) { impl_->abort(id, now, reason); }
std::int64_t Replica::abort_all(Time now, const std::string& reason) { return impl_->abort_all(now, reason); }
void Replica::take_handoffs(std::vector<Handoff>& out) { impl_->take_handoffs(out); }
void Replica::release_handoff(RequestId id) { impl_->release_handoff(id); }
void Replica::accept_handoff(Handoff handoff, Time now) { impl_->accept_handoff(std::move(handoff), now); }
void Replica::start_inbound(Time now, std::vector<InboundTransfer>& out) { impl_->start_inbound(now, out); }
void Replica::finish_inbound(RequestId id, Time now, std::int64_t bytes) { impl_->finish_inbound(id, now, bytes); }
StepPlan Replica::plan(Time now) { return impl_->plan(now); }
void Replica::plan_into(StepPlan& plan, Time now) { impl_->plan_into(plan, now); }
void Replica::complete(const StepPlan& plan, const StepResult& result, Time now) { impl_->complete(plan, result, now); }
std::vector<RequestRecord> Replica::take_finished() { return impl_->take_finished(); }
std::vector<StepRecord> Replica::take_steps() { return impl_->take_steps(); }
void Replica::take_finished(std::vector<RequestRecord>& out) { impl_->take_finished(out); }
void Replica::take_steps(std::vector<StepRecord>& out) { impl_->take_steps(out); }
void Replica::set_record_steps(bool on, std::uint64_t every) { impl_->set_record_steps(on, every); }
const StepTally& Replica::step_tally() const { return impl_->step_tally(); }
std::optional<Time> Replica::next_wakeup() const { return impl_->next_wakeup(); }
bool Replica::can_plan() const { return impl_->can_plan(); }
std::int32_t Replica::plans_in_flight() const { return impl_->plans_in_flight(); }
bool Replica::has_work() const { return impl_->has_work(); }
std::int32_t Replica::num_waiting() const { return impl_->num_waiting(); }
std::int32_t Replica::num_running() const { return impl_->num_running(); }
std::int64_t Replica::num_outstanding() const { return impl_->num_outstanding(); }
double Replica::kv_usage() const { return impl_->kv_usage(); }
const KvCacheStats& Replica::kv_stats() const { return impl_->kv_stats(); }
std::int32_t Replica::cached_prefix_tokens(const Request& req) const { return impl_->cached_prefix_tokens(req); }
std::optional<SeqView> Replica::seq(RequestId id) const { return impl_->seq(id); }
std::vector<SeqView> Replica::live_seqs() const { return impl_->live_seqs(); }
const KvCache& Replica::kv_cache() const { return impl_->kv_cache(); }

}  // namespace twin
