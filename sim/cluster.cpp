#include "sim/cluster.hpp"

#include <algorithm>
#include <optional>

#include "base/error.hpp"
#include "models/hybrid_layers.hpp"
#include "sim/calibrated_cost_model.hpp"
#include "sim/data_parallel.hpp"
#include "sim/host_work.hpp"
#include "sim/custom_all_reduce.hpp"
#include "sim/mixed_attention.hpp"
#include "sim/graph_capture.hpp"
#include "sim/input_quant_kernels.hpp"
#include "sim/medusa_heads_cost_model.hpp"
#include "metrics/step_csv.hpp"
#include "sim/acceptance_model.hpp"
#include "sim/replay_cost_model.hpp"
#include "sim/speculative_cost_model.hpp"

namespace twin {
namespace {

std::string describe(const GroupPlan& g) {
  const std::string quant =
      g.precision.quantized() ? ", " + std::string(quant_method_name(g.precision.quant.method)) : std::string();
  return g.model.name + " (" + std::string(dtype_name(g.dtype)) + quant + ") on " + g.hardware.name + " with tp=" +
         std::to_string(g.layout.tp) + " pp=" + std::to_string(g.layout.pp) +
         (g.layout.ep > 1 ? " ep=" + std::to_string(g.layout.ep) : std::string());
}

// Replicas of a group never straddle nodes unless one replica needs more
// than a node; within a replica the TP ranks of a stage are adjacent, so TP
// stays on NVLink and PP crosses nodes first.
std::vector<std::vector<GpuId>> place_replicas(ClusterTopology& topology, const NodeLinks& links,
                                               std::int32_t gpus_per_replica, std::int32_t count) {
  std::vector<std::vector<GpuId>> out;
  const std::int32_t per_node = links.gpus_per_node;
  if (gpus_per_replica <= per_node) {
    const std::int32_t replicas_per_node = per_node / gpus_per_replica;
    const std::int32_t nodes = (count + replicas_per_node - 1) / replicas_per_node;
    const std::vector<GpuId> gpus = topology.add_nodes(links, nodes);
    for (std::int32_t r = 0; r < count; ++r) {
      const std::int32_t node = r / replicas_per_node, slot = r % replicas_per_node;
      const auto begin = gpus.begin() + node * per_node + slot * gpus_per_replica;
      out.emplace_back(begin, begin + gpus_per_replica);
    }
  } else {
    const std::int32_t nodes_per_replica = (gpus_per_replica + per_node - 1) / per_node;
    for (std::int32_t r = 0; r < count; ++r) {
      const std::vector<GpuId> gpus = topology.add_nodes(links, nodes_per_replica);
      out.emplace_back(gpus.begin(), gpus.begin() + gpus_per_replica);
    }
  }
  return out;
}

// Pools: the loop's disaggregation options and the transfer model over the
// cluster graph.
void set_up_pools(Cluster& cluster, const ClusterConfig& config) {
  const DisaggregationConfig& d = config.disaggregation;
  cluster.disagg = disagg_options(d, cluster.router);
  std::vector<KvTransferModel::Endpoint> endpoints;
  std::vector<std::int32_t> senders, receivers;
  const std::string where = config.origin.empty() ? std::string() : config.origin + ": ";
  for (std::size_t gi = 0; gi < cluster.groups.size(); ++gi) {
    const GroupPlan& g = cluster.groups[gi];
    if (g.replica.role == ReplicaRole::mixed) {
      throw UsageError(where + "groups[" + std::to_string(gi) +
                       "]: a cluster with prefill and decode groups has no 'mixed' group; give every group a role");
    }
    for (std::size_t r = 0; r < g.replica_gpus.size(); ++r) {
      KvTransferModel::Endpoint e;
      e.group = static_cast<std::int32_t>(gi);
      e.first_gpu = g.replica_gpus[r].front();
      // A request's KV lives on one EP rank's GPUs: those are its lanes.
      e.gpus = static_cast<std::int32_t>(g.replica_gpus[r].size()) / g.layout.ep;
      e.node = cluster.topology.node_of(e.first_gpu);
      e.kv_bytes_per_token = static_cast<double>(kv_bytes_per_token(g.model, g.kv_dtype));
      e.layers = static_cast<std::int32_t>(std::max<std::int64_t>(1, g.model.num_hidden_layers));
      e.nic_bandwidth = g.hardware.nic_bandwidth_gbps * 1e9;
      const auto index = static_cast<std::int32_t>(endpoints.size());
      (g.replica.role == ReplicaRole::prefill ? senders : receivers).push_back(index);
      endpoints.push_back(e);
    }
  }
  if (receivers.empty()) throw UsageError(where + "groups: a cluster with a prefill group needs a decode group");
  if (senders.empty() && cluster.disagg.mode != DisaggMode::never) {
    throw UsageError(where + "groups: a cluster with a decode group needs a prefill group (or disaggregation.mode "
                     "'never')");
  }
  cluster.transfers = std::make_shared<KvTransferModel>(kv_transfer_mode(d.kv_transfer), std::move(endpoints),
                                                        cluster.topology, senders, receivers);
  if (!d.replay.empty()) {
    cluster.transfers->replay(std::make_shared<const ReplayTransfers>(ReplayTransfers::from_file(d.replay)));
  }
}

// vLLM's start-up check on the planned KV cache (engine/core/kv_fit.hpp):
// with `auto_len` (--max-model-len auto, vLLM's -1) max_model_len comes
// down to the largest that fits; otherwise a cache that cannot hold one
// request of max_model_len is refused in vLLM's words, as vLLM refuses to
// start, unless `check` asks only for the verdict (--explain-memory).
void settle_max_model_len(GroupPlan& g, bool auto_len, StartUpCheck check) {
  KvFit& fit = g.memory.fit;
  if (auto_len && !fit.fits() && fit.largest_fitting > 0) {
    g.memory.auto_fitted_from = fit.max_model_len;
    set_replica_option(g.replica, "max_model_len", std::to_string(fit.largest_fitting));
    fit = check_kv_fit(fit.available_bytes, fit.block_bytes, fit.block_size, fit.largest_fitting);
  }
  if (fit.fits() || check == StartUpCheck::report) return;
  throw Error(describe(g) + ": vLLM would refuse to start: " + kv_fit_refusal(fit) +
              (auto_len ? "" : " (--max-model-len auto lowers it to what fits)"));
}

// A quantised checkpoint (config.json's quantization_config) decides the
// method, as in vLLM; a --quantization that names another is refused in
// vLLM's words (its ModelConfig._verify_quantization).
QuantMethod checkpoint_quantization(const ModelDesc& model, QuantMethod asked, const std::string& asked_text) {
  if (model.quantization.empty()) return asked;
  const QuantMethod stored = parse_quant_method(model.quantization);
  if (asked_text.empty()) return stored;
  if (asked != stored) {
    throw UsageError("quantization (--quantization): quantization method specified in the model config (" +
                     model.quantization + ") does not match the quantization method specified in the "
                     "`quantization` argument (" + asked_text + "); model " + model.name);
  }
  return asked;
}

}  // namespace

DisaggOptions disagg_options(const DisaggregationConfig& d, const std::string& router) {
  DisaggOptions o;
  o.mode = disagg_mode(d.mode);
  o.conditional_threshold = d.conditional_threshold;
  o.prefill_router = d.prefill_router.empty() ? router : router_policy(d.prefill_router);
  o.decode_router = d.decode_router.empty() ? router : router_policy(d.decode_router);
  return o;
}

std::int64_t Cluster::total_kv_blocks() const {
  std::int64_t n = 0;
  for (const auto& g : groups) n += static_cast<std::int64_t>(g.memory.num_blocks) * g.config.count;
  return n;
}

double activation_reserve_bytes(const ModelDesc& m, const ParallelLayout& layout, Dtype weights,
                                const SchedulerConfig& scheduler) {
  // vLLM sizes the cache after a profile run: one forward pass over the full
  // token budget split across max_num_seqs dummy sequences, then sampling of
  // one token per sequence. What it subtracts is the peak of the PyTorch
  // allocator over that run, and the two phases do not overlap: the MLP's
  // buffers are free again before the logits exist.
  const double tokens = effective_token_budget(scheduler);
  const double act = static_cast<double>(activation_bytes(weights));
  const double tp = layout.tp;
  const double ffn = static_cast<double>(m.intermediate_size) * (m.is_moe() ? std::max<int64_t>(1, m.num_experts_per_tok) : 1);
  // At the MLP: the fused gate/up output (2 x ffn), the activated half
  // (ffn), and three hidden-wide tensors (residual, normed input, the
  // output being written). Fitted: vLLM's measured peak for Llama-3.1-8B on
  // an RTX 3090 grew by 109,756 bytes per budget token between 20k and 29k
  // tokens (vllm-project/vllm issue 10517); this gives 110,592.
  const double forward = tokens * (3.0 * ffn / tp + 3.0 * m.hidden_size) * act;
  // Sampling: the logits are gathered whole on each rank, in fp32, with the
  // probabilities and log-probabilities beside them.
  const double sampled = std::min<double>(scheduler.max_num_seqs, tokens);
  const double sampler = sampled * static_cast<double>(m.vocab_size) * 4.0 * 3.0;
  return std::max(forward, sampler);
}

NodeLinks node_links(const HardwareDesc& hw) {
  NodeLinks l;
  l.gpus_per_node = hw.gpus_per_node;
  l.interconnect = hw.interconnect == "nvlink_pairs" ? Interconnect::nvlink_pairs
                   : hw.interconnect == "pcie"       ? Interconnect::pcie
                   : hw.interconnect == "xgmi_mesh"  ? Interconnect::mesh
                                                     : Interconnect::nvswitch;
  l.nvlink_bandwidth = hw.nvlink_bandwidth_gbps * 1e9;
  // The profile gives the fixed latency of one all-reduce over the whole
  // node (a ring of gpus_per_node: 2(n-1) hops); the graph wants one hop.
  const double ring_hops = hw.gpus_per_node > 1 ? 2.0 * (hw.gpus_per_node - 1) : 1.0;
  l.nvlink_latency = hw.nvlink_latency_us * 1e3 / ring_hops;
  l.pcie_bandwidth = hw.pcie_bandwidth_gbps * 1e9;
  l.pcie_latency = hw.pcie_latency_us * 1e3;
  l.nic_bandwidth = hw.nic_bandwidth_gbps * 1e9;
  l.nic_latency = hw.nic_latency_us * 1e3;
  return l;
}

namespace {

// A dtype key of a group: unset is none, "auto" (vLLM's default) the caller's default.
std::optional<Dtype> given_dtype(const std::string& text, const char* key) {
  if (text.empty()) return std::nullopt;
  try {
    return parse_dtype_or_auto(text);
  } catch (const UsageError& e) {
    throw UsageError(std::string(key) + ": " + e.what());
  }
}

// The weights' dtype and quantization and the KV cache's dtype. Unset or
// "auto": the model's dtype for the weights, the weights' 16-bit type (fp32
// stays fp32) for the KV cache. Returns the quantization method asked for.
QuantMethod resolve_precision(GroupPlan& g, const ReplicaGroupConfig& gc) {
  g.dtype = given_dtype(gc.dtype, "dtype (--dtype)").value_or(g.model.torch_dtype);
  // Quantization (docs/quantization.md): --dtype fp8 / int8 are read as
  // --quantization fp8 / int8_w8a8 with the model's 16-bit activations,
  // so there is one path for 8-bit weights.
  QuantMethod method = QuantMethod::none;
  try {
    method = parse_quant_method(gc.quantization);
  } catch (const UsageError& e) {
    throw UsageError(std::string("quantization (--quantization): ") + e.what());
  }
  method = checkpoint_quantization(g.model, method, gc.quantization);
  if (g.dtype == Dtype::fp8 || g.dtype == Dtype::int8) {
    const QuantMethod implied = g.dtype == Dtype::fp8 ? QuantMethod::fp8 : QuantMethod::int8_w8a8;
    if (method != QuantMethod::none && method != implied) {
      throw UsageError("dtype (--dtype) " + std::string(dtype_name(g.dtype)) + " means quantization " +
                       std::string(quant_method_name(implied)) + ", not '" + gc.quantization +
                       "': give the activation dtype (bf16, fp16) with --quantization");
    }
    method = implied;
    g.dtype = g.model.torch_dtype == Dtype::fp16 ? Dtype::fp16 : Dtype::bf16;
  }
  if (method != QuantMethod::none && g.dtype == Dtype::fp32 && g.hardware.kind == DeviceKind::gpu) {
    throw UsageError("quantization (--quantization) " + std::string(quant_method_name(method)) +
                     " runs with 16-bit activations on a GPU; give --dtype bf16 or fp16");
  }
  try {
    g.precision = WeightPrecision(g.dtype, quant_scheme(method, quant_hardware(g.hardware)));
    // vLLM's Mxfp4Config quantises FusedMoE layers only: on a dense
    // model it would run every layer in 16 bits, not what was asked.
    if (g.precision.quant.experts_only && !g.model.is_moe()) {
      throw UsageError("quantization mxfp4 quantises MoE experts only in vLLM (its linear layers stay " +
                       std::string(dtype_name(g.dtype)) + "), and model " + g.model.name +
                       " has no experts; use nvfp4 (modelopt_fp4), awq or fp8");
    }
  } catch (const UsageError& e) {
    throw UsageError("quantization (--quantization) on " + g.hardware.name + ": " + e.what());
  }
  g.kv_dtype = given_dtype(gc.kv_dtype, "kv_dtype (--kv-cache-dtype)")
                   .value_or(g.dtype == Dtype::fp32 ? Dtype::fp32 : (g.dtype == Dtype::fp16 ? Dtype::fp16 : Dtype::bf16));
  return method;
}

// The group's calibrated profile (null without one): its dtypes and its
// quantization become the group's.
std::shared_ptr<const CalibratedTables> load_group_profile(GroupPlan& g, const ReplicaGroupConfig& gc,
                                                           QuantMethod method) {
  if (gc.profile.empty()) return nullptr;
  if (!gc.replay.empty()) throw UsageError("a group takes either replay or profile, not both");
  std::shared_ptr<const CalibratedTables> profile = load_calibrated_tables(gc.profile);
  apply_profile_dtypes(*profile, gc.dtype, gc.kv_dtype, g.dtype, g.kv_dtype);
  // The profile timed the engine's own GEMMs, quantized or not: a group
  // takes its quantization, and one that asks for another is refused (its
  // tables would price other kernels).
  const std::string& measured = profile->profile().metadata.quantization;
  const QuantMethod profiled = parse_quant_method(measured);
  if (!gc.quantization.empty() && method != profiled) {
    throw UsageError(profile->origin() + ": the profile was measured with " +
                     (measured.empty() ? std::string("no quantization") : "quantization " + measured) +
                     ", the group asks for " + gc.quantization + " (leave it unset to use the profile's)");
  }
  g.precision = WeightPrecision(g.dtype, quant_scheme(profiled, quant_hardware(g.hardware)));
  return profile;
}

// The scheduler: the preset, then the cluster's options and overrides, then
// the group's. As vLLM (and `twinserve run`): requests are bounded by the
// model's own context unless max_model_len says less. The presets' 131072
// would let 8k prompts through on a 4k model and size a no-chunking budget
// for contexts the model never sees.
void settle_scheduler(GroupPlan& g, const ClusterConfig& config, const ReplicaGroupConfig& gc) {
  g.replica = replica_preset(config.scheduler_preset);
  const std::int32_t context = static_cast<std::int32_t>(std::clamp<std::int64_t>(g.model.max_position_embeddings, 2, 1 << 30));
  if (g.model.max_position_embeddings > 0) g.replica.scheduler.max_model_len = context;
  for (const auto& [key, value] : config.scheduler_options) set_replica_option(g.replica, key, value);
  apply_overrides(g.replica, config.overrides);
  for (const auto& [key, value] : gc.scheduler_options) set_replica_option(g.replica, key, value);
  if (g.model.max_position_embeddings > 0 && g.replica.scheduler.max_model_len > context) {
    throw UsageError("max_model_len " + std::to_string(g.replica.scheduler.max_model_len) +
                     " exceeds the context of model '" + g.model.name + "' (" + std::to_string(context) + ")");
  }
  g.replica.max_plans_in_flight = std::max(g.replica.max_plans_in_flight, gc.pp);
  g.replica.role = replica_role(gc.role);
}

// Speculative decoding's draft model (if any), run at tp=1 beside the target.
struct DraftModel {
  std::optional<ModelDesc> model;
  bool shares_embeddings = false;  // EAGLE's head reads the target's embedding and LM head
};

DraftModel settle_speculation(GroupPlan& g, const ReplicaGroupConfig& gc) {
  DraftModel draft;
  if (!gc.speculative) return draft;
  const SpeculativeConfig& sc = *gc.speculative;
  if (gc.pp != 1) throw UsageError("speculative_config: speculative decoding is modelled at pp=1 only");
  g.replica.scheduler.num_speculative_tokens = sc.num_speculative_tokens;
  if (sc.method == SpeculativeMethod::eagle) {
    draft.model = sc.model.empty() ? eagle_head(g.model) : resolve_model(sc.model);
    draft.shares_embeddings = true;
  } else if (sc.method == SpeculativeMethod::draft_model) {
    draft.model = resolve_model(sc.model);
  }
  if (draft.model && draft.model->vocab_size != g.model.vocab_size) {
    throw UsageError("speculative_config: draft model '" + draft.model->name + "' has a vocabulary of " +
                     std::to_string(draft.model->vocab_size) + " tokens, the target '" + g.model.name + "' " +
                     std::to_string(g.model.vocab_size) + ": a draft must share the target's vocabulary");
  }
  return draft;
}

// What speculation adds to one GPU of the target: the draft's weights and
// its KV pool (one draft block per target block, docs/speculative.md), or
// Medusa's heads (no KV: they read the target's last hidden state).
void add_speculation_memory(MemoryPlanInput& s, const GroupPlan& g, const ReplicaGroupConfig& gc,
                            const DraftModel& draft) {
  if (draft.model) {
    const ParallelLayout one{1, 1};
    std::int64_t draft_weights = weight_bytes_per_gpu(*draft.model, g.dtype, one, 0);
    if (draft.shares_embeddings) {
      ModelDesc bare = *draft.model;  // the embedding and LM head alone: the target's, already counted
      bare.num_hidden_layers = 0;
      draft_weights -= weight_bytes_per_gpu(bare, g.dtype, one, 0);
    }
    s.weight_bytes_per_gpu += static_cast<double>(draft_weights);
    s.kv_block_bytes_per_gpu +=
        static_cast<double>(kv_bytes_per_token_per_gpu(*draft.model, g.kv_dtype, one, 0)) * g.replica.kv.block_size;
  }
  if (gc.speculative && gc.speculative->method == SpeculativeMethod::medusa) {
    s.weight_bytes_per_gpu +=
        static_cast<double>(medusa_heads_bytes(g.model, gc.speculative->num_speculative_tokens, g.dtype, gc.tp));
  }
}

// The memory plan: the fullest GPU decides, so every stage is checked; then
// max_model_len against what the KV memory holds, and the block count.
void plan_group_memory(GroupPlan& g, const ClusterConfig& config, const ReplicaGroupConfig& gc,
                       const DraftModel& draft, StartUpCheck check) {
  MemoryPlanInput mem;
  mem.gpu_memory_bytes = memory_bytes(g.hardware);
  mem.gpu_memory_utilization = gc.gpu_memory_utilization > 0 ? gc.gpu_memory_utilization : config.gpu_memory_utilization;
  mem.num_gpu_blocks_override = gc.num_gpu_blocks_override >= 0 ? gc.num_gpu_blocks_override : config.num_gpu_blocks_override;
  mem.activation_reserve_bytes = activation_reserve_bytes(g.model, g.layout, g.dtype, g.replica.scheduler);
  mem.runtime_reserve_bytes = g.hardware.runtime_reserve_bytes;
  mem.collective_reserve_bytes = g.layout.tp * g.layout.pp * g.layout.ep > 1 ? g.hardware.collective_reserve_bytes : 0.0;
  // Lockstep DP ranks each hold their own KV cache (vLLM's
  // num_gpu_blocks_override is per rank too); --ep's one replica holds its ranks'.
  mem.attention_ranks = is_lockstep(gc) ? 1 : g.layout.ep;
  // vLLM captures its CUDA graphs after the cache is sized, so the graph
  // pool lives in the (1 - utilization) headroom, not in this budget.
  mem.cuda_graph_reserve_bytes = 0;
  bool first = true;
  KvFit worst_fit;
  for (int stage = 0; stage < g.layout.pp; ++stage) {
    MemoryPlanInput s = mem;
    s.weight_bytes_per_gpu = static_cast<double>(weight_bytes_per_gpu(g.model, g.precision, g.layout, stage));
    s.kv_block_bytes_per_gpu =
        static_cast<double>(kv_bytes_per_token_per_gpu(g.model, g.kv_dtype, g.layout, stage)) * g.replica.kv.block_size;
    // A hybrid model's linear-attention / Mamba state, in the model's dtype
    // (vLLM's mamba_cache_dtype "auto"), for every request that can run.
    s.state_bytes_per_seq_per_gpu =
        static_cast<double>(state_bytes_per_request_per_gpu(g.model, g.dtype, g.layout, stage));
    s.state_seqs = s.state_bytes_per_seq_per_gpu > 0 ? g.replica.scheduler.max_num_seqs : 0;
    add_speculation_memory(s, g, gc, draft);
    const MemoryPlan plan = plan_memory(s, describe(g));
    // vLLM checks every worker: the stage with the least KV memory per
    // block decides (with an override, the memory plan's figure still).
    const KvFit fit =
        check_kv_fit(plan.kv_bytes, plan.block_bytes, g.replica.kv.block_size, g.replica.scheduler.max_model_len);
    if (first || fit.largest_fitting < worst_fit.largest_fitting) worst_fit = fit;
    if (first || plan.num_blocks < g.memory.num_blocks) g.memory = plan;
    first = false;
  }
  g.memory.fit = worst_fit;
  settle_max_model_len(g, config.max_model_len_auto, check);
  g.replica.kv.num_blocks = g.memory.num_blocks;
  validate(g.replica);
}

// The roofline's inputs for the group. Replicas of a group are placed
// alike, so the first one's paths price all of them and the group shares
// one cost model.
RooflineParams group_roofline_params(ClusterTopology& topology, const GroupPlan& g, const ReplicaGroupConfig& gc) {
  RooflineParams params = roofline_params(g.hardware, g.precision);
  params.graph_capture = graph_capture_for(g.replica, g.hardware, gc.tp);
  // The engine the preset stands for does the host work (sim/host_work.hpp).
  params.host = host_work_for(g.replica.scheduler, g.hardware);
  params.separate_input_quant = separate_input_quant(g.replica.scheduler, g.precision);
  params.mixed_attention_rows = mixed_attention_rows_for(g.replica, g.hardware);
  params.mixed_attention_block_ns = g.hardware.mixed_attention_block_ns;
  const std::vector<GpuId>& gpus = g.replica_gpus.front();
  const std::int32_t stage_gpus = g.layout.gpus_per_stage();
  for (int stage = 0; stage < gc.pp; ++stage) {
    const auto first_gpu = gpus.begin() + stage * stage_gpus;  // EP rank 0's TP group leads the stage
    std::vector<GpuId> ring(first_gpu, first_gpu + gc.tp);
    params.tp_rings.push_back(topology.ring(ring));
    params.custom_all_reduce_below.push_back(custom_all_reduce_below(g.replica, params.tp_rings.back(), params.pcie_p2p));
    params.pp_links.push_back(stage + 1 < gc.pp ? topology.path(*first_gpu, gpus[(stage + 1) * stage_gpus]) : PathCost{});
    std::vector<GpuId> ep_group;  // TP rank 0 of every EP rank
    for (std::int32_t r = 0; r < gc.ep; ++r) ep_group.push_back(first_gpu[r * gc.tp]);
    params.ep_groups.push_back(topology.all_to_all(ep_group));
  }
  params.host_link = topology.host_path(gpus.front());
  if (g.hardware.pcie_efficiency > 0) params.host_link.bandwidth *= g.hardware.pcie_efficiency;
  params.kv_block_bytes_per_gpu = g.memory.block_bytes;
  return params;
}

// KV tiers below HBM: each replica has tiers of these sizes of its own; a
// block moves the KV of every GPU of the replica.
void set_up_tiers(GroupPlan& g, const ClusterConfig& config, const ReplicaGroupConfig& gc, const PathCost& host_link) {
  if (config.kv_tiers.empty()) return;
  const double block_bytes = g.memory.block_bytes * gc.tp * gc.pp;
  g.tiers = std::make_shared<KvTierModel>(
      resolve_kv_tiers(config.kv_tiers, block_bytes, host_link.bandwidth, static_cast<Time>(host_link.latency)),
      block_bytes, config.kv_tier_load_overlap, /*measured=*/!gc.replay.empty());
  g.replica.kv.tiers = g.tiers->core_tiers();
  validate(g.replica);
}

// The target's cost model: the engine's step log replayed, a calibrated
// profile, or the roofline.
std::shared_ptr<CostModel> base_cost_model(const GroupPlan& g, const ReplicaGroupConfig& gc,
                                           const std::shared_ptr<const CalibratedTables>& profile,
                                           const RooflineParams& params) {
  if (!gc.replay.empty()) {
    if (gc.pp != 1) throw UsageError(describe(g) + ": replay needs pp=1 (the engine's step log has one stage)");
    return std::make_shared<ReplayCostModel>(ReplayCostModel::from_file(gc.replay));
  }
  if (profile) return std::make_shared<CalibratedCostModel>(profile, g.model, g.layout, g.dtype, g.kv_dtype, g.memory.block_bytes);
  return std::make_shared<RooflineCostModel>(g.model, g.layout, g.precision, g.kv_dtype, params);
}

// How many proposals verification accepts: a replay follows the engine's
// own counts (replay parity); otherwise a rate, given or measured.
std::shared_ptr<AcceptanceModel> acceptance_model(const ReplicaGroupConfig& gc, std::uint64_t seed) {
  const SpeculativeConfig& sc = *gc.speculative;
  std::vector<StepRecord> replayed;
  if (!gc.replay.empty()) replayed = read_step_records(gc.replay);
  if (has_recorded_acceptance(replayed)) return std::make_shared<ReplayAcceptance>(replayed, gc.replay);
  double alpha = sc.acceptance_rate;
  if (sc.acceptance_length >= 0) alpha = acceptance_rate_for_length(sc.acceptance_length, sc.num_speculative_tokens);
  if (!sc.acceptance_from.empty()) alpha = measured_acceptance_rate(read_step_records(sc.acceptance_from), sc.acceptance_from);
  if (alpha < 0) {
    throw UsageError("speculative_config: the simulator needs acceptance_rate, acceptance_length or "
                     "acceptance_from (an engine run's steps.csv)");
  }
  return std::make_shared<RateAcceptance>(alpha, seed);
}

// What drafting costs: the draft model's (its profile or its roofline on
// one GPU of the target's), or Medusa's heads on the target's GPUs in dense
// precision (the target's links, its curves at the activation dtype).
std::shared_ptr<CostModel> draft_cost_model(ClusterTopology& topology, const GroupPlan& g,
                                            const ReplicaGroupConfig& gc, const DraftModel& draft,
                                            const RooflineParams& params) {
  const SpeculativeConfig& sc = *gc.speculative;
  std::shared_ptr<CostModel> draft_cost;
  if (draft.model) {
    const ParallelLayout one{1, 1};
    if (!sc.draft_profile.empty()) {
      const auto tables = load_calibrated_tables(sc.draft_profile);
      Dtype dw = g.dtype, dkv = g.kv_dtype;
      apply_profile_dtypes(*tables, "", "", dw, dkv);
      draft_cost = std::make_shared<CalibratedCostModel>(tables, *draft.model, one, dw, dkv, 0.0);
    } else {
      RooflineParams draft_params = roofline_params(g.hardware, g.dtype);
      const std::vector<GpuId> own{g.replica_gpus.front().front()};
      draft_params.tp_rings.push_back(topology.ring(own));
      draft_params.pp_links.push_back(PathCost{});
      draft_params.host_link = params.host_link;
      draft_cost = std::make_shared<RooflineCostModel>(*draft.model, one, g.dtype, g.kv_dtype, draft_params);
    }
  }
  if (sc.method == SpeculativeMethod::medusa) {
    RooflineParams heads_params = roofline_params(g.hardware, g.dtype);
    heads_params.tp_rings = params.tp_rings;
    heads_params.pp_links = params.pp_links;
    heads_params.host_link = params.host_link;
    draft_cost = std::make_shared<MedusaHeadsCostModel>(
        RooflineCostModel(g.model, ParallelLayout{gc.tp, 1}, g.dtype, g.kv_dtype, heads_params),
        sc.num_speculative_tokens, g.dtype);
  }
  return draft_cost;
}

// The group's replicas, each with the group's cost model.
void add_replicas(Cluster& cluster, const GroupPlan& g, std::size_t index, const std::shared_ptr<CostModel>& model,
                  const std::shared_ptr<AcceptanceModel>& acceptance) {
  const ReplicaGroupConfig& gc = g.config;
  const bool lockstep = is_lockstep(gc);
  const std::int32_t stage_gpus = g.layout.gpus_per_stage();
  for (std::int32_t r = 0; r < gc.count; ++r) {
    SimReplicaSpec spec;
    spec.config = g.replica;
    spec.cost_model = model;
    spec.pipeline_stages = gc.pp;
    spec.acceptance = acceptance;
    spec.tiers = g.tiers;
    spec.power = g.hardware.power;
    // A lockstep instance's GPUs are shared by its DP ranks, each a replica.
    spec.stage_gpus = lockstep ? std::max(1, stage_gpus / gc.count) : stage_gpus;
    cluster.replicas.push_back(std::move(spec));
    cluster.lockstep.push_back(lockstep ? static_cast<std::int32_t>(index) : -1);
  }
}

// One group, in order: precision, layout, scheduler, speculation, memory,
// placement, tiers, the cost model; then its replicas.
void build_group(Cluster& cluster, const ClusterConfig& config, const ReplicaGroupConfig& gc, std::size_t index,
                 std::int32_t& next_replica, StartUpCheck check) {
  // As a --config file allows (each replica holds its own KV cache state).
  if (gc.count < 1 || gc.count > 1'000'000)
    throw UsageError("replica count must be from 1 to 1000000, got " + std::to_string(gc.count));
  GroupPlan g;
  g.config = gc;
  g.model = resolve_model(gc.model);
  g.hardware = resolve_hardware(gc.hardware);
  const QuantMethod method = resolve_precision(g, gc);
  const std::shared_ptr<const CalibratedTables> profile = load_group_profile(g, gc, method);
  g.layout = ParallelLayout{gc.tp, gc.pp, gc.ep, gc.expert_busiest_share};
  check_layout(g.model, g.layout);
  if (gc.ep > 1 && (profile || !gc.replay.empty())) {
    throw UsageError("ep=" + std::to_string(gc.ep) + ": expert parallelism is priced by the roofline only (the engine "
                     "runs one GPU; drop --profile / --replay)");
  }
  settle_scheduler(g, config, gc);
  const DraftModel draft = settle_speculation(g, gc);
  plan_group_memory(g, config, gc, draft, check);

  // A lockstep DP instance is one EP replica's GPUs, its ranks replicas of the core.
  const std::int32_t gpus_per_replica = g.layout.gpus_per_stage() * gc.pp;
  g.replica_gpus = place_replicas(cluster.topology, node_links(g.hardware), gpus_per_replica, is_lockstep(gc) ? 1 : gc.count);
  g.first_replica = next_replica;
  next_replica += gc.count;

  const RooflineParams params = group_roofline_params(cluster.topology, g, gc);
  set_up_tiers(g, config, gc, params.host_link);
  std::shared_ptr<CostModel> model = base_cost_model(g, gc, profile, params);
  std::shared_ptr<AcceptanceModel> acceptance;
  if (gc.speculative) {
    acceptance = acceptance_model(gc, config.seed);
    // A replay's measured durations include the drafting already.
    if (gc.replay.empty()) {
      const SpeculativeConfig& sc = *gc.speculative;
      model = std::make_shared<SpeculativeCostModel>(model, draft_cost_model(cluster.topology, g, gc, draft, params),
                                                     sc.num_draft_tokens, sc.num_speculative_tokens,
                                                     sc.method == SpeculativeMethod::medusa);
    }
  }
  add_replicas(cluster, g, index, model, acceptance);
  cluster.groups.push_back(std::move(g));
}

}  // namespace

Cluster build_cluster(const ClusterConfig& config, StartUpCheck check) {
  Cluster cluster;
  cluster.router = router_policy(data_parallel_router(config));
  // Each vLLM DP rank is a replica of its own (sim/data_parallel.hpp).
  const std::vector<ReplicaGroupConfig> groups = expand_data_parallel(config);
  std::int32_t next_replica = 0;
  for (std::size_t index = 0; index < groups.size(); ++index) {
    // A group's errors name the config file and the group, when there is one.
    const std::string where =
        config.origin.empty() ? std::string()
        : config.groups.empty() ? config.origin + ": "
                                : config.origin + ": groups[" + std::to_string(index) + "]: ";
    try {
      build_group(cluster, config, groups[index], index, next_replica, check);
    } catch (const UsageError& e) {
      if (where.empty()) throw;
      throw UsageError(where + e.what());
    } catch (const Error& e) {
      if (where.empty()) throw;
      throw Error(where + e.what());
    }
  }
  if (has_pools(config)) set_up_pools(cluster, config);
  if (std::none_of(cluster.lockstep.begin(), cluster.lockstep.end(), [](std::int32_t g) { return g >= 0; }))
    cluster.lockstep.clear();
  return cluster;
}

}  // namespace twin
