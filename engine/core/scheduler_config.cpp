#include "engine/core/scheduler_config.hpp"

#include <algorithm>
#include <charconv>
#include <string>

#include "base/error.hpp"
#include "engine/core/option_values.hpp"
#include "engine/core/policy.hpp"

namespace twin {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

constexpr std::string_view kWhat = "scheduler option";

std::int64_t parse_int(std::string_view key, std::string_view value, std::int64_t lo, std::int64_t hi) {
  return option_int(kWhat, key, value, lo, hi);
}
double parse_double(std::string_view key, std::string_view value, double lo, double hi) {
  return option_real(kWhat, key, value, lo, hi);
}
bool parse_bool(std::string_view key, std::string_view value) { return option_bool(kWhat, key, value); }
template <class Enum, std::size_t N>
Enum parse_enum(std::string_view key, std::string_view value, const std::pair<const char*, Enum> (&table)[N]) {
  return option_enum(kWhat, key, value, table);
}
// A registered policy's name (policy.hpp).
template <class Registry>
std::string parse_policy(std::string_view key, std::string_view value, const Registry& registry) {
  if (!registry.contains(value)) {
    throw UsageError(bad_option_value(kWhat, key, value, "one of: " + registry.joined_names()));
  }
  return std::string(value);
}

constexpr std::pair<const char*, PreemptionMode> kPreemption[] = {{"recompute", PreemptionMode::recompute},
                                                                  {"swap", PreemptionMode::swap}};
constexpr std::int64_t kIntMax = kMaxKnobCount;
// More lookahead than this is never useful (acceptance decays geometrically)
// and would only inflate every decode's KV reservation.
constexpr std::int64_t kMaxSpeculativeTokens = 64;

}  // namespace

std::vector<std::string> scheduler_preset_names() {
  return {"vllm", "vllm-v0", "sarathi", "orca", "static", "dynamic", "lightllm", "sglang", "trtllm"};
}

SchedulerConfig scheduler_preset(std::string_view name) {
  SchedulerConfig c;  // the struct's defaults are vLLM v1's
  c.preset = std::string(name);
  if (name == "vllm") {
    // vLLM 0.19's defaults (vllm/config/scheduler.py): async scheduling and
    // the full-prompt admission check are on.
    c.async_scheduling = true;
    c.admission_reserve = "prompt";
    return c;
  }
  if (name == "sglang") {
    // SGLang's scheduler (managers/scheduler.py): a prefill batch runs
    // alone, decodes wait for it (no mixed batches without
    // --enable-mixed-chunk); chunked_prefill_size 8192 (its default on
    // 80 GB-class GPUs; smaller GPUs get less: set max_num_batched_tokens);
    // schedule_policy fcfs.
    c.decode_first = false;
    c.chunked_budget = 8192;
    // Its overlap scheduler (server_args.py disable_overlap_schedule=False)
    // runs one batch ahead, as vLLM's async scheduling does.
    c.async_scheduling = true;
    // Its PrefillAdder reserves the running requests' expected outputs
    // (policy_admission.cpp, SglangReserve).
    c.admission_reserve = "sglang";
    return c;
  }
  if (name == "trtllm") {
    // TensorRT-LLM's in-flight batching (trtllm-serve defaults): context
    // and generation requests share a step; max_batch_size 2048,
    // max_num_tokens 8192; the GUARANTEED_NO_EVICT capacity policy admits
    // a request only when its whole sequence fits, so nothing is ever
    // preempted. Context chunking is on so that any prompt up to
    // max_model_len is served (trtllm-serve leaves it off and then needs
    // max_num_tokens to cover the longest prompt; docs/engines.md).
    c.max_num_seqs = 2048;
    c.chunked_budget = 8192;
    c.admission_reserve = "sequence";
    // The PyTorch executor's overlap scheduler, on by default
    // (disable_overlap_scheduler=False): step n+1 launched before step n's
    // results are processed.
    c.async_scheduling = true;
    return c;
  }
  if (name == "sarathi") {
    c.chunked_budget = 512;
    return c;
  }
  // The remaining presets run whole prompts in one step, prefills ahead of decodes.
  c.enable_chunked_prefill = false;
  c.decode_first = false;
  // vLLM v0's default scheduler is this same algorithm: whole prompts,
  // prefills first, a step with prefills carries no decodes, budget
  // max(max_model_len, 2048), 256 seqs. Its KV side (watermark, no prefix
  // caching) is set in replica_preset.
  if (name == "orca" || name == "lightllm" || name == "vllm-v0") return c;
  if (name == "static") {
    c.batching = "static";
    return c;
  }
  if (name == "dynamic") {
    c.batching = "dynamic";
    return c;
  }
  throw UsageError("unknown scheduler preset '" + excerpt(name) + "': known presets are " +
                   join(scheduler_preset_names()));
}

std::vector<std::string> scheduler_option_keys() {
  return {"max_num_batched_tokens", "max_num_seqs", "max_model_len", "enable_chunked_prefill",
          "long_prefill_token_threshold", "decode_first", "batching", "batch_size", "batch_timeout_ms",
          "order", "length_bucket_bounds", "preemption", "victim", "stop_at_eos", "max_queued_requests",
          "max_queue_time_ms", "num_speculative_tokens", "async_scheduling", "admission_reserve",
          "scheduler_reserve_full_isl"};
}

void set_scheduler_option(SchedulerConfig& c, std::string_view key, std::string_view value) {
  if (key == "max_num_batched_tokens") {
    c.max_num_batched_tokens = static_cast<std::int32_t>(parse_int(key, value, 0, kIntMax));
  } else if (key == "max_num_seqs") {
    c.max_num_seqs = static_cast<std::int32_t>(parse_int(key, value, 1, kIntMax));
  } else if (key == "max_model_len") {
    c.max_model_len = static_cast<std::int32_t>(parse_int(key, value, 2, kIntMax));
  } else if (key == "enable_chunked_prefill") {
    c.enable_chunked_prefill = parse_bool(key, value);
  } else if (key == "long_prefill_token_threshold") {
    c.long_prefill_token_threshold = static_cast<std::int32_t>(parse_int(key, value, 0, kIntMax));
  } else if (key == "async_scheduling") {
    c.async_scheduling = parse_bool(key, value);
  } else if (key == "admission_reserve") {
    c.admission_reserve = parse_policy(key, value, admission_policies());
  } else if (key == "scheduler_reserve_full_isl") {
    c.admission_reserve = parse_bool(key, value) ? "prompt" : "chunk";
  } else if (key == "decode_first") {
    c.decode_first = parse_bool(key, value);
  } else if (key == "batching") {
    c.batching = parse_policy(key, value, batch_policies());
  } else if (key == "batch_size") {
    c.batch_size = static_cast<std::int32_t>(parse_int(key, value, 1, kIntMax));
  } else if (key == "batch_timeout_ms" || key == "batch_timeout") {
    c.batch_timeout = from_millis(parse_double(key, value, 0.0, 1e9));
  } else if (key == "order") {
    c.order = parse_policy(key, value, queue_orders());
  } else if (key == "length_bucket_bounds") {
    std::vector<std::int32_t> bounds;
    std::string_view rest = value;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      bounds.push_back(static_cast<std::int32_t>(parse_int(key, rest.substr(0, comma), 1, kIntMax)));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    if (bounds.empty() || !std::is_sorted(bounds.begin(), bounds.end())) {
      throw UsageError(bad_option_value(kWhat, key, value, "increasing comma-separated prompt lengths, e.g. 256,1024,4096"));
    }
    c.length_bucket_bounds = std::move(bounds);
  } else if (key == "preemption") {
    c.preemption = parse_enum(key, value, kPreemption);
  } else if (key == "victim") {
    c.victim = parse_policy(key, value, victim_policies());
  } else if (key == "stop_at_eos") {
    c.stop_at_eos = parse_bool(key, value);
  } else if (key == "max_queued_requests" || key == "max_waiting_requests") {
    c.max_queued_requests = static_cast<std::int32_t>(parse_int(key, value, 0, kIntMax));
  } else if (key == "max_queue_time_ms") {
    c.max_queue_time = from_millis(parse_double(key, value, 0.0, 1e9));
  } else if (key == "num_speculative_tokens") {
    c.num_speculative_tokens = static_cast<std::int32_t>(parse_int(key, value, 0, kMaxSpeculativeTokens));
  } else {
    throw UsageError("unknown scheduler option '" + excerpt(key) + "': known options are " +
                     join(scheduler_option_keys()));
  }
}

std::int32_t effective_token_budget(const SchedulerConfig& c) {
  if (c.max_num_batched_tokens > 0) return c.max_num_batched_tokens;
  return c.enable_chunked_prefill ? c.chunked_budget : std::max(c.max_model_len, 2048);
}

void validate(const SchedulerConfig& c) {
  auto fail = [](const std::string& what) { throw UsageError("scheduler config: " + what); };
  const auto over = [](std::int64_t v) { return v > kMaxKnobCount; };
  if (over(c.max_num_batched_tokens) || over(c.max_num_seqs) || over(c.max_model_len) || over(c.batch_size) ||
      over(c.max_queued_requests) || over(c.long_prefill_token_threshold)) {
    fail("a count is above " + std::to_string(kMaxKnobCount));
  }
  if (c.max_num_batched_tokens < 0) fail("max_num_batched_tokens must be >= 0 (0 = auto)");
  if (c.chunked_budget < 1 || over(c.chunked_budget)) fail("the preset's chunked budget must be in [1, 2^30]");
  if (c.max_num_seqs < 1) fail("max_num_seqs must be >= 1");
  if (c.max_model_len < 2) fail("max_model_len must be >= 2");
  if (c.long_prefill_token_threshold < 0) fail("long_prefill_token_threshold must be >= 0");
  if (c.batch_size < 1) fail("batch_size must be >= 1");
  if (c.batch_timeout < 0) fail("batch_timeout must be >= 0");
  if (c.max_queued_requests < 0) fail("max_queued_requests must be >= 0 (0 = unlimited)");
  if (c.max_queue_time < 0) fail("max_queue_time must be >= 0 (0 = none)");
  if (c.num_speculative_tokens < 0 || c.num_speculative_tokens > kMaxSpeculativeTokens) {
    fail("num_speculative_tokens must be in [0, " + std::to_string(kMaxSpeculativeTokens) + "]");
  }
  const std::int32_t budget = effective_token_budget(c);
  if (!c.enable_chunked_prefill && budget < c.max_model_len) {
    // As vLLM: without chunking a whole prompt (or a recompute of prompt plus
    // output) must fit one step, or the request could wait forever.
    // Only a budget given explicitly gets here (an unset one follows max_model_len).
    fail("max_num_batched_tokens (--max-num-batched-tokens) " + std::to_string(budget) +
         " is smaller than max_model_len (--max-model-len) " + std::to_string(c.max_model_len) +
         " with chunked prefill off; raise it, leave it unset (0) or enable chunking");
  }
  if (!c.enable_chunked_prefill && c.long_prefill_token_threshold > 0) {
    fail("long_prefill_token_threshold needs enable_chunked_prefill");
  }
  // Names set in code rather than through set_scheduler_option.
  auto check = [&](const auto& registry, const std::string& name) {
    if (!registry.contains(name)) {
      fail(registry.kind() + " '" + excerpt(name) + "' is not registered: known names are " + registry.joined_names());
    }
  };
  check(queue_orders(), c.order);
  check(admission_policies(), c.admission_reserve);
  check(victim_policies(), c.victim);
  check(batch_policies(), c.batching);
  if (!std::is_sorted(c.length_bucket_bounds.begin(), c.length_bucket_bounds.end())) {
    fail("length_bucket_bounds must be increasing");
  }
}

}  // namespace twin
