#include "sim/memory_plan.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#include "base/error.hpp"

namespace twin {
namespace {

std::string gib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string mib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

MemoryPlan plan_memory(const MemoryPlanInput& in, const std::string& what) {
  if (!(in.gpu_memory_utilization > 0 && in.gpu_memory_utilization <= 1)) {
    throw UsageError("gpu_memory_utilization must be in (0, 1], got " + std::to_string(in.gpu_memory_utilization));
  }
  if (in.num_gpu_blocks_override < 0) throw UsageError("num_gpu_blocks_override must not be negative");
  if (!(in.kv_block_bytes_per_gpu > 0)) throw Error(what + ": a KV block takes no memory; check the model descriptor");
  MemoryPlan plan;
  plan.device_bytes = in.gpu_memory_bytes;
  plan.utilization = in.gpu_memory_utilization;
  plan.usable_bytes = in.gpu_memory_bytes * in.gpu_memory_utilization;
  plan.weight_bytes = in.weight_bytes_per_gpu;
  plan.activation_bytes = in.activation_reserve_bytes;
  plan.runtime_bytes = in.runtime_reserve_bytes;
  plan.collective_bytes = in.collective_reserve_bytes;
  plan.cuda_graph_bytes = in.cuda_graph_reserve_bytes;
  if (in.state_bytes_per_seq_per_gpu < 0 || in.state_seqs < 0) throw UsageError("state bytes and seqs must not be negative");
  plan.state_seqs = in.state_seqs;
  plan.state_bytes = in.state_bytes_per_seq_per_gpu * in.state_seqs;
  plan.kv_bytes = plan.usable_bytes - plan.weight_bytes - plan.activation_bytes - plan.runtime_bytes -
                  plan.collective_bytes - plan.cuda_graph_bytes - plan.state_bytes;
  plan.block_bytes = in.kv_block_bytes_per_gpu;
  const double other = plan.runtime_bytes + plan.collective_bytes + plan.cuda_graph_bytes + plan.state_bytes;
  const std::string numbers = gib(in.gpu_memory_bytes) + " x " + std::to_string(in.gpu_memory_utilization).substr(0, 4) +
                              " = " + gib(plan.usable_bytes) + " usable per GPU; weights " + gib(plan.weight_bytes) +
                              ", activations " + gib(plan.activation_bytes) + " and runtime/collective/graph/state reserves " +
                              gib(other) + " per GPU leave " + gib(plan.kv_bytes) + " for KV; one block takes " +
                              mib(plan.block_bytes);
  if (plan.kv_bytes < plan.block_bytes) {
    throw Error(what + " does not fit: " + numbers +
                ". Use more GPUs per replica (--tensor-parallel-size / --pipeline-parallel-size), a smaller dtype, "
                "or a larger --gpu-memory-utilization");
  }
  if (in.attention_ranks < 1) throw UsageError("attention ranks must be >= 1");
  plan.attention_ranks = in.attention_ranks;
  const double blocks = std::floor(plan.kv_bytes / plan.block_bytes) * in.attention_ranks;
  if (in.num_gpu_blocks_override > 0) {
    // vLLM honours the override even beyond what fits; so do we (it is how
    // users pin a cache size to compare runs).
    plan.num_blocks = in.num_gpu_blocks_override;
    plan.overridden = true;
  } else {
    plan.num_blocks = static_cast<std::int32_t>(std::min(blocks, static_cast<double>(kMaxSimulatedBlocks) + 1));
  }
  // The serving core keeps a few dozen bytes of state per block from the
  // start: past this a replica would need gigabytes of simulator memory
  // (and no real GPU holds that many blocks).
  if (plan.num_blocks > kMaxSimulatedBlocks) {
    throw Error(what + ": a KV cache of " + (plan.overridden ? std::to_string(plan.num_blocks) : "over " + std::to_string(kMaxSimulatedBlocks)) +
                " blocks per replica is more than the simulator holds (" + std::to_string(kMaxSimulatedBlocks) +
                "); check the hardware profile's memory (" + numbers + ") or num_gpu_blocks_override");
  }
  return plan;
}

std::string explain_memory_plan(const MemoryPlan& p, const std::string& indent) {
  std::string out;
  auto line = [&](const char* sign, const char* name, double bytes) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s %-34s %10.3f GiB %18.0f bytes\n", indent.c_str(), sign, name,
                  bytes / (1024.0 * 1024.0 * 1024.0), bytes);
    out += buf;
  };
  char util[64];
  std::snprintf(util, sizeof util, "x gpu_memory_utilization %.4g", p.utilization);
  line(" ", "device memory (as reported)", p.device_bytes);
  line(" ", util, p.usable_bytes);
  line("-", "weights", p.weight_bytes);
  line("-", "activation peak (profile run)", p.activation_bytes);
  line("-", "runtime (CUDA context, workspaces)", p.runtime_bytes);
  line("-", "collectives (NCCL, all-reduce)", p.collective_bytes);
  line("-", "CUDA graphs (inside the budget)", p.cuda_graph_bytes);
  if (p.state_seqs > 0) {
    char state[64];
    std::snprintf(state, sizeof state, "fixed state (%d seqs x %.2f MiB)", p.state_seqs,
                  p.state_bytes / p.state_seqs / (1024.0 * 1024.0));
    line("-", state, p.state_bytes);
  }
  line("=", "KV cache", p.kv_bytes);
  line("/", "one block", p.block_bytes);
  char buf[160];
  if (p.attention_ranks > 1) {
    std::snprintf(buf, sizeof buf, "%sx %-34s %10d\n", indent.c_str(), "attention ranks (EP, each its own KV)",
                  p.attention_ranks);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "%s= %-34s %10d%s\n", indent.c_str(), "KV blocks", p.num_blocks,
                p.overridden ? " (num_gpu_blocks_override)" : "");
  out += buf;
  if (p.auto_fitted_from > 0) {
    out += indent + "--max-model-len auto: max_model_len lowered from " + std::to_string(p.auto_fitted_from) + " to " +
           std::to_string(p.fit.max_model_len) + ", the largest that fits\n";
  }
  if (p.fit.max_model_len > 0) out += indent + kv_fit_verdict(p.fit) + "\n";
  return out;
}

}  // namespace twin
