#include "planner/vllm_command.hpp"

#include <sstream>

#include "sim/cluster.hpp"

namespace twin {
namespace {

// Our dtype names as vLLM's --dtype spells them; fp8/int8 are vLLM
// quantization methods rather than dtypes.
std::string dtype_flags(const std::string& dtype) {
  if (dtype.empty() || dtype == "auto") return " --dtype auto";
  if (dtype == "bf16" || dtype == "bfloat16") return " --dtype bfloat16";
  if (dtype == "fp16" || dtype == "float16" || dtype == "half") return " --dtype float16";
  if (dtype == "fp32" || dtype == "float32" || dtype == "float") return " --dtype float32";
  if (dtype.rfind("fp8", 0) == 0) return " --quantization fp8";
  return " --dtype auto  # weights " + dtype + ": pick the matching --quantization";
}

}  // namespace

std::string vllm_serve_command(const Candidate& c) {
  const Cluster cluster = build_cluster(candidate_config(c, 1, "", 0));
  const GroupPlan& g = cluster.groups.front();
  const SchedulerConfig& s = g.replica.scheduler;
  std::ostringstream out;
  out << "vllm serve " << (g.model.hf_id.empty() ? g.model.name : g.model.hf_id);
  out << " --tensor-parallel-size " << g.layout.tp << " --pipeline-parallel-size " << g.layout.pp;
  // vLLM's EP: data-parallel attention ranks with the experts spread over
  // all tp x dp GPUs (ours keeps each expert TP-sharded inside a rank: the
  // same at tp 1).
  if (g.layout.ep > 1) out << " --data-parallel-size " << g.layout.ep << " --enable-expert-parallel";
  out << " --max-model-len " << s.max_model_len << " --max-num-batched-tokens " << effective_token_budget(s)
      << " --max-num-seqs " << s.max_num_seqs << " --block-size " << g.replica.kv.block_size;
  out << (s.enable_chunked_prefill ? " --enable-chunked-prefill" : " --no-enable-chunked-prefill");
  out << (g.replica.kv.enable_prefix_caching ? " --enable-prefix-caching" : " --no-enable-prefix-caching");
  out << " --gpu-memory-utilization " << g.memory.utilization;
  if (s.order == "priority") out << " --scheduling-policy priority";
  out << dtype_flags(c.dtype);
  if (!c.quantization.empty() && c.quantization != "none") out << " --quantization " << c.quantization;
  if (!c.kv_dtype.empty() && c.kv_dtype != "auto") out << " --kv-cache-dtype " << c.kv_dtype;
  if (c.kv_dram_gib > 0) out << " --kv-offloading-size " << c.kv_dram_gib;
  const std::string& preset = s.preset;
  if (preset == "vllm-v0") {
    out << "  # vLLM v0's scheduler (prefills ahead of decodes, none mixed): vLLM v1 always mixes them";
  } else if (preset != "vllm" && preset != "sarathi") {
    out << "  # preset " << preset << " has no vLLM switch: this is the nearest vLLM configuration";
  }
  if (c.disaggregated()) {
    out << "  # per instance: " << c.prefill << " prefill and " << c.decode
        << " decode instances per unit, each with --kv-transfer-config (kv_role kv_producer / kv_consumer)";
  }
  return out.str();
}

}  // namespace twin
