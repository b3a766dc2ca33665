#include "tools/twinserve/scheduler_flags.hpp"

#include <CLI/CLI.hpp>

#include <string>

#include "base/error.hpp"
#include "engine/core/policy.hpp"
#include "engine/core/replica.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/flag_registry.hpp"

namespace twin::cli {

void add_scheduler_flags(CLI::App& sub, SchedulerFlags& f) {
  add_flag(sub, FlagId::scheduler, f.preset);
  add_flag(sub, FlagId::max_num_batched_tokens, f.max_num_batched_tokens);
  add_flag(sub, FlagId::max_num_seqs, f.max_num_seqs);
  sub.add_option("--block-size", f.block_size, "KV block size in tokens")->check(int_range(1, 512));
  sub.add_option("--max-queued-requests", f.max_queued_requests,
                 "Waiting requests per replica at most; an arrival beyond is rejected ('queue full'); 0 = unlimited")
      ->check(int_range(0, kMaxKnobCount));
  sub.add_option("--max-queue-time-ms", f.max_queue_time_ms,
                 "Reject a request not yet scheduled this long after its arrival ('queue timeout'); 0 = none")
      ->check(real_range(0, 1e9));
  sub.add_option("--scheduling-policy", f.scheduling_policy,
                 "vLLM's: fcfs (first come, first served) or priority (the trace's priority, lower first, then arrival)")
      ->check(CLI::IsMember({"fcfs", "priority"}));
  // The registry's names (engine/core/policy_list.hpp), checked when applied.
  sub.add_option("--queue-order", f.queue_order,
                 "Waiting-queue order, a registered policy (docs/policies.md): " + queue_orders().joined_names());
  sub.add_flag("--enable-prefix-caching", f.prefix_on, "Prefix caching on");
  sub.add_flag("--no-enable-prefix-caching,--disable-radix-cache", f.prefix_off,
               "Prefix caching off (SGLang's --disable-radix-cache)");
  sub.add_flag("--enable-chunked-prefill", f.chunked_on, "Chunked prefill on");
  sub.add_flag("--no-enable-chunked-prefill", f.chunked_off, "Chunked prefill off");
  sub.add_flag("--async-scheduling", f.async_on, "vLLM's async scheduling on (the vllm preset's default)");
  sub.add_flag("--no-async-scheduling", f.async_off, "vLLM's async scheduling off");
  sub.add_flag("--enforce-eager,--disable-cuda-graph", f.enforce_eager,
               "No CUDA graphs: steps are priced at their own token counts, not padded to a capture size (SGLang's "
               "--disable-cuda-graph)");
  sub.add_option("--cuda-graph-max-bs,--max-cudagraph-capture-size", f.graph_capture_max,
                 "The largest CUDA-graph capture size (SGLang's --cuda-graph-max-bs, vLLM's "
                 "max_cudagraph_capture_size; default: the engine's, docs/engines.md)")
      ->check(int_range(1, kMaxKnobCount));
  sub.add_flag("--disable-custom-all-reduce", f.disable_custom_all_reduce,
               "TP all-reduces through NCCL only, not the engine's own kernel for small messages (vLLM's flag)");
  sub.add_option("--set", f.set_options, "Any scheduler / KV option as KEY=VALUE (repeatable; see engine/core/scheduler.md)");
}

ReplicaOverrides scheduler_overrides(const SchedulerFlags& f) {
  if (f.prefix_on && f.prefix_off) throw UsageError("--enable-prefix-caching and --no-enable-prefix-caching contradict");
  if (f.chunked_on && f.chunked_off) throw UsageError("--enable-chunked-prefill and --no-enable-chunked-prefill contradict");
  if (f.async_on && f.async_off) throw UsageError("--async-scheduling and --no-async-scheduling contradict");
  ReplicaOverrides out;
  out.max_num_batched_tokens = f.max_num_batched_tokens;
  out.max_num_seqs = f.max_num_seqs;
  out.block_size = f.block_size;
  out.max_queued_requests = f.max_queued_requests;
  out.max_queue_time_ms = f.max_queue_time_ms;
  if (f.prefix_on || f.prefix_off) out.enable_prefix_caching = f.prefix_on;
  if (f.chunked_on || f.chunked_off) out.enable_chunked_prefill = f.chunked_on;
  if (f.scheduling_policy) {
    // As vLLM's scheduler: priority orders the waiting queue and preempts
    // the lowest priority (largest value) first; fcfs the arrival order and
    // the newest.
    const bool priority = *f.scheduling_policy == "priority";
    out.order = priority ? "priority" : "fcfs";
    out.victim = priority ? "lowest_priority" : "newest";
  }
  if (f.queue_order) {
    if (f.scheduling_policy) throw UsageError("--queue-order and --scheduling-policy both set the queue order: give one");
    queue_orders().check(*f.queue_order);
    out.order = *f.queue_order;
  }
  if (f.async_on || f.async_off) out.options.emplace_back("async_scheduling", f.async_on ? "true" : "false");
  if (f.enforce_eager && f.graph_capture_max) throw UsageError("--enforce-eager and --cuda-graph-max-bs contradict");
  if (f.enforce_eager) out.options.emplace_back("graph_capture_max_tokens", "0");
  if (f.graph_capture_max) out.options.emplace_back("graph_capture_max_tokens", std::to_string(*f.graph_capture_max));
  if (f.disable_custom_all_reduce) out.options.emplace_back("custom_all_reduce", "false");
  for (const std::string& kv : f.set_options) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--set expects KEY=VALUE, got '" + kv + "'");
    out.options.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return out;
}

}  // namespace twin::cli
