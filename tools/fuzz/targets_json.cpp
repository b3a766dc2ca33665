// Fuzz targets over the JSON files the program reads: model descriptors and
// Hugging Face config.json, hardware profiles, calibrated profiles, cluster
// configs and plan search files. Each goes through the program's own loader
// from a file, and then through what the commands compute from the loaded
// value first (sizes, op lists, a short simulation), where a value the
// loader let through would do its damage.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/runtime/model_config.hpp"
#include "hwprofiles/calibrated_lookup.hpp"
#include "hwprofiles/calibrated_profile.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/embedded_file.hpp"
#include "models/json_fields.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/speculative_config.hpp"
#include "models/step_ops.hpp"
#include "planner/search_space.hpp"
#include "sim/calibrated_cost_model.hpp"
#include "sim/cluster.hpp"
#include "sim/cluster_config.hpp"
#include "sim/run.hpp"
#include "sim/sources.hpp"
#include "tools/fuzz/fuzz_target.hpp"

namespace twin::fuzz {
namespace {

bool names_file(const std::string& message, const Scratch& scratch) {
  return message.find(scratch.path("input.json")) != std::string::npos;
}

// A small step mix: a prefill chunk after a cached prefix, decodes, a
// sampled last chunk.
BatchShape sample_batch() {
  BatchShape b;
  b.seqs = {SeqShape{17, 32, false}, SeqShape{1, 100, true}, SeqShape{1, 7, true}, SeqShape{5, 0, true}};
  return b;
}

// --- model descriptors and config.json ---

std::vector<std::string> model_seeds() {
  std::vector<std::string> seeds;
  for (const EmbeddedFile& f : bundled_model_files()) seeds.emplace_back(f.text);
  seeds.emplace_back(R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 131072, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256
})");
  seeds.emplace_back(R"({"architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "sliding_window": null, "torch_dtype": "bfloat16", "vocab_size": 32000})");
  return seeds;
}

// The loader names the file and key; the engine's shape checks after it
// (model_config_from) see a loaded model, not a file, and name the model and
// the key ("model 'x': hidden_act 'gelu' is not supported ...").
bool names_model(const std::string& message, const Scratch& scratch) {
  return names_file(message, scratch) || message.rfind("model '", 0) == 0;
}

void run_model(const std::string& input, const Scratch& scratch) {
  const ModelDesc m = load_model_file(scratch.write("input.json", input));
  // What `models show` prints.
  (void)param_count(m);
  (void)active_param_count(m);
  for (Dtype d : kAllDtypes) {
    (void)weight_bytes(m, d);
    (void)kv_bytes_per_token(m, d);
  }
  // What a simulation prices each step with, at two layouts.
  std::vector<Op> ops;
  for (const ParallelLayout layout : {ParallelLayout{1, 1}, ParallelLayout{2, 2}}) {
    try {
      check_layout(m, layout);
    } catch (const UsageError&) {
      continue;  // a layout this model cannot take: refused before any op
    }
    ops.clear();
    step_ops(m, sample_batch(), layout, Dtype::bf16, Dtype::bf16, 0, ops);
    (void)step_totals(ops);
  }
  // What the engine checks before it allocates weights. A model the
  // simulator prices and the engine does not run (DeepSeek-style MoE) is
  // refused there by name; the file itself was read.
  try {
    check_model_config(model_config_from(m));
  } catch (const Error& e) {
    if (!names_model(e.what(), scratch)) throw;
  }
}

// --- hardware profiles ---

std::vector<std::string> hardware_seeds() {
  std::vector<std::string> seeds;
  for (const EmbeddedFile& f : bundled_hardware_files()) seeds.emplace_back(f.text);
  return seeds;
}

void run_hardware(const std::string& input, const Scratch& scratch) {
  const HardwareDesc hw = load_hardware_file(scratch.write("input.json", input));
  for (Dtype d : kAllDtypes) {
    if (supports(hw, d)) (void)peak_flops(hw, d);
  }
  for (double flops : {0.0, 1.0, 1e6, 1e12, 1e18}) (void)gemm_efficiency(hw, flops);
  (void)memory_bytes(hw);
}

// --- calibrated profiles ---

// A small version-2 profile for the bundled model "tiny" (fp32, CPU): one
// table per op kind the model's steps use, a few points each, with made-up
// times that grow with the work.
std::string tiny_profile_text() {
  const ModelDesc m = resolve_model("tiny");
  CalibratedProfile p;
  ProfileMetadata& meta = p.metadata;
  meta.model = "tiny";
  meta.dtype = "fp32";
  meta.kv_dtype = "fp32";
  meta.backend = "cpu";
  meta.device = "cpu (2 threads)";
  meta.cpu_model = "fuzz";
  meta.hostname = "fuzz";
  meta.date = "2025-01-01T00:00:00Z";
  meta.git_commit = "unknown";
  meta.twinserve_version = "0.1";
  meta.threads = 2;
  meta.max_tokens = 64;
  meta.repeats = 3;
  p.overhead.base_ns = 5000;
  p.overhead.per_seq_ns = 100;
  p.overhead.samples.push_back({"decode x1", 1, 1, 9000, 4000, 4100, 9100});
  const auto time_of = [](const Op& op) { return 1000.0 + op.flops / 50.0 + op.bytes / 10.0; };
  const auto point = [&](double x, const Op& op) {
    return CalibratedPoint{x, time_of(op), time_of(op) * 0.9, time_of(op) * 1.1, op.flops, op.bytes};
  };
  // The op of `kind` in a step of `count` seqs of `tokens` new tokens after
  // `context` cached ones.
  const auto op_of = [&](int count, int tokens, int context, bool samples, OpKind kind) {
    BatchShape b;
    b.seqs.assign(static_cast<std::size_t>(count), SeqShape{tokens, context, samples});
    std::vector<Op> ops;
    step_ops(m, b, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, ops);
    for (Op& op : ops) {
      if (op.kind == OpKind::attn_decode && kind == OpKind::attn_prefill) op.kind = kind;
      if (op.kind == kind) return op;
    }
    return Op{};
  };
  for (int k = 0; k < kNumOpKinds; ++k) {
    const auto kind = static_cast<OpKind>(k);
    const TableKind table = table_kind(kind);
    if (table == TableKind::gemm || table == TableKind::elementwise) {
      const bool per_seq = kind == OpKind::lm_head || kind == OpKind::sample;
      CurveTable t;
      t.op = kind;
      for (int x : {1, 4, 16, 64}) {
        const Op op = per_seq ? op_of(x, 1, 0, true, kind) : op_of(1, x, 0, false, kind);
        if (op.kind != kind) break;  // not an op of this model
        t.n = op.n;
        t.k = table == TableKind::gemm ? op.k : 0;
        t.points.push_back(point(x, op));
      }
      if (!t.points.empty()) (table == TableKind::gemm ? p.gemm : p.elementwise).push_back(std::move(t));
    } else if (table == TableKind::attention) {
      GridTable t;
      t.op = kind;
      const bool prefill = kind == OpKind::attn_prefill;
      for (int key : prefill ? std::vector<int>{1, 16, 64} : std::vector<int>{1, 4, 16}) {
        GridRow row;
        row.key = key;
        for (int context : {16, 64, 256}) {
          const Op op = prefill ? op_of(1, key, context, false, kind) : op_of(key, 1, context, false, kind);
          t.heads = op.n;
          t.head_dim = op.k;
          row.points.push_back(point(context, op));
        }
        t.rows.push_back(std::move(row));
      }
      p.attention.push_back(std::move(t));
    }
  }
  return calibrated_profile_text(p);
}

std::vector<std::string> calibrated_seeds() { return {tiny_profile_text()}; }

void run_calibrated(const std::string& input, const Scratch& scratch) {
  const std::string path = scratch.write("input.json", input);
  std::shared_ptr<const CalibratedTables> tables = load_calibrated_tables(path);
  // Priced as `simulate --model tiny --hw cpu --profile FILE` prices steps.
  Dtype weights = Dtype::fp32, kv = Dtype::fp32;
  apply_profile_dtypes(*tables, "", "", weights, kv);
  CalibratedCostModel model(tables, resolve_model("tiny"), ParallelLayout{}, weights, kv, 4096.0);
  BatchShape batch = sample_batch();
  StepInput step;
  step.shape = &batch;
  (void)model.stage_time(step);
  batch.seqs = {SeqShape{4096, 60000, true}};  // far beyond the tables
  step.idle_ns = 1'000'000'000;
  (void)model.stage_time(step);
  (void)model.swap_time(8);
}

// --- cluster configs ---

std::vector<std::string> cluster_seeds() {
  return {R"({
  "groups": [
    {"model": "llama-3.1-8b", "hardware": "h100-80gb", "dtype": "bf16", "tp": 1, "pp": 1, "count": 2},
    {"model": "llama-3.1-8b", "hardware": "a100-80gb", "count": 1,
     "gpu_memory_utilization": 0.85, "scheduler": {"max_num_seqs": 128}}
  ],
  "scheduler": {"preset": "vllm", "max_num_batched_tokens": 4096, "enable_prefix_caching": true},
  "router": "least_outstanding",
  "slos": "ttft_p90<=1s,tpot_p99<=60ms",
  "seed": 0,
  "gpu_memory_utilization": 0.9,
  "num_gpu_blocks_override": 0
})",
          R"({"groups": [{"model": "tiny", "hardware": "cpu", "dtype": "fp32", "count": 1,
  "num_gpu_blocks_override": 64, "scheduler": {"block_size": 4, "preemption": "swap", "num_host_blocks": 16}}],
  "scheduler": {"preset": "sarathi", "max_num_batched_tokens": 64}, "router": "prefix_affinity", "seed": 3})",
          R"({"groups": [{"model": "llama-3.1-70b", "hardware": "h200", "tp": 4, "pp": 2}],
  "scheduler": {"preset": "orca", "max_num_seqs": 8}, "router": "round_robin"})",
          // Prefill and decode pools (docs/disaggregation.md keys), and
          // speculative decoding per group.
          R"({"groups": [
    {"model": "tiny", "hardware": "cpu", "dtype": "fp32", "role": "prefill", "count": 1, "num_gpu_blocks_override": 64},
    {"model": "tiny", "hardware": "cpu", "dtype": "fp32", "role": "decode", "count": 2, "num_gpu_blocks_override": 64}],
  "disaggregation": {"mode": "conditional", "conditional_threshold": 32, "kv_transfer": "layerwise",
                     "prefill_router": "least_outstanding", "decode_router": "round_robin"}})",
          R"({"groups": [
    {"model": "llama-3.1-8b", "hardware": "h100-80gb", "role": "prefill", "tp": 2},
    {"model": "llama-3.1-8b", "hardware": "h100-80gb", "role": "decode", "count": 2,
     "speculative_config": {"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.7}}],
  "disaggregation": {"mode": "always", "kv_transfer": "whole"}, "router": "least_outstanding"})",
          R"({"groups": [{"model": "tiny", "hardware": "cpu", "dtype": "fp32", "num_gpu_blocks_override": 128,
  "speculative_config": {"method": "draft_model", "model": "tiny", "num_speculative_tokens": 2,
                         "acceptance_length": 2.2}}]})",
          "{}"};
}

void run_cluster(const std::string& input, const Scratch& scratch) {
  const ClusterConfig config = load_cluster_config(scratch.write("input.json", input));
  // Replicas are up to 10^6 per group by contract; a cluster that size is a
  // long run, not a fault, so only small ones are built and simulated.
  std::int64_t replicas = 0;
  for (const ReplicaGroupConfig& g : config.groups) replicas += g.count;
  if (replicas > 16) return;
  GeneratorOptions gen;
  gen.max_requests = 4;
  gen.rate = 10;
  gen.prompt = "uniform:8:200";
  gen.output = "uniform:1:20";
  gen.prefix_count = 1;
  gen.prefix_tokens = 64;
  gen.prefix_fraction = 0.5;
  gen.seed = 1;
  GeneratorSource source(gen);
  (void)run_simulation(config, source, RunOutputs{});
}

// --- --speculative-config (run, simulate; a cluster group's speculative_config) ---

std::vector<std::string> speculative_seeds() {
  return {R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4})",
          R"({"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":6,"prompt_lookup_min":2,"acceptance_rate":0.6})",
          R"({"method":"draft_model","model":"tiny","num_speculative_tokens":3})",
          R"({"method":"draft_model","model":"tiny","num_speculative_tokens":4,"acceptance_length":2.5})",
          R"({"method":"eagle","num_speculative_tokens":5,"acceptance_length":3.6})",
          R"({"method":"eagle","model":"tiny","num_speculative_tokens":2,"acceptance_rate":0.4})",
          R"({"method":"medusa","num_speculative_tokens":4,"acceptance_length":2.3,"num_draft_tokens":63})"};
}

bool same_speculative(const SpeculativeConfig& a, const SpeculativeConfig& b) {
  return a.method == b.method && a.num_speculative_tokens == b.num_speculative_tokens && a.model == b.model &&
         a.prompt_lookup_max == b.prompt_lookup_max && a.prompt_lookup_min == b.prompt_lookup_min &&
         a.acceptance_rate == b.acceptance_rate && a.acceptance_length == b.acceptance_length &&
         a.acceptance_from == b.acceptance_from && a.draft_profile == b.draft_profile &&
         a.num_draft_tokens == b.num_draft_tokens;
}

void run_speculative(const std::string& input, const Scratch&) {
  const SpeculativeConfig config = parse_speculative_config(input, "--speculative-config");
  // summary.json echoes the config in the input format: it must read back.
  const SpeculativeConfig back =
      speculative_config_from_json(nlohmann::json::parse(speculative_config_json(config).dump()), "echo");
  if (!same_speculative(config, back)) throw std::logic_error("speculative config round trip changed it");
  if (config.num_speculative_tokens > 0 && config.acceptance_length < 0 && config.acceptance_rate < 0) {
    (void)expected_tokens_per_step(0.5, config.num_speculative_tokens);
  }
  if (config.acceptance_length > 0) (void)acceptance_rate_for_length(config.acceptance_length, config.num_speculative_tokens);
  // Files named by the config are the user's (a mutated path could name a
  // device): only self-contained configs go on to a simulation.
  if (!config.acceptance_from.empty() || !config.draft_profile.empty()) return;
  if (config.method != SpeculativeMethod::ngram && !config.model.empty() && config.model != "tiny") return;
  // As `simulate --model tiny --hw cpu --speculative-config JSON` serves 4 requests.
  ClusterConfig cluster;
  ReplicaGroupConfig& g = cluster.groups.emplace_back();
  g.model = "tiny";
  g.hardware = "cpu";
  g.dtype = "fp32";
  g.num_gpu_blocks_override = 256;
  g.speculative = config;
  // vLLM's form has no acceptance keys, which the simulator needs.
  if (config.acceptance_rate < 0 && config.acceptance_length < 0) g.speculative->acceptance_rate = 0.5;
  GeneratorOptions gen;
  gen.max_requests = 4;
  gen.rate = 10;
  gen.prompt = "uniform:8:100";
  gen.output = "uniform:1:20";
  gen.seed = 1;
  GeneratorSource source(gen);
  (void)run_simulation(cluster, source, RunOutputs{});
}

bool names_speculative(const std::string& message, const Scratch&) {
  return message.rfind("--speculative-config", 0) == 0 || message.find("speculative") != std::string::npos;
}

// --- plan search files ---

std::vector<std::string> search_seeds() {
  return {R"({"model": "llama-3.1-8b", "hardware": ["h100-80gb", "a100-80gb"], "tp": [1, 2], "pp": [1],
  "preset": ["vllm", "sarathi"], "max_num_batched_tokens": [512, 2048], "max_num_seqs": [64],
  "router": ["least_outstanding"], "max_model_len": 8192, "max_gpus": 16, "budget": 100.5})",
          R"({"model": "tiny", "dtype": "fp32", "hardware": "cpu", "tp": 1})"};
}

void run_search(const std::string& input, const Scratch& scratch) {
  SearchSpace space;
  load_search_file(space, scratch.write("input.json", input));
  check_search_space(space);
  // The plan enumerates the product of the lists; a huge product is the
  // user's choice (and its size is bounded by the file's), not a fault.
  std::uint64_t product = 1;
  for (std::size_t n : {space.hardware.size(), space.tp.size(), space.pp.size(), space.presets.size(),
                        std::max<std::size_t>(space.max_num_batched_tokens.size(), 1),
                        std::max<std::size_t>(space.max_num_seqs.size(), 1), space.routers.size()}) {
    product = std::min<std::uint64_t>(product * n, std::uint64_t{1} << 40);
  }
  if (product <= 4096) {
    for (const Candidate& c : enumerate_candidates(space)) (void)candidate_label(c);
  }
}

FuzzTarget json_target(const char* name, const char* summary, std::vector<std::string> (*seeds)(),
                       void (*run)(const std::string&, const Scratch&), std::size_t max_bytes = 1 << 16,
                       bool (*names)(const std::string&, const Scratch&) = nullptr) {
  FuzzTarget t = file_target(name, summary, seeds, run, "input.json", max_bytes);
  t.names_origin = names;
  return t;
}

}  // namespace

std::vector<FuzzTarget> json_targets() {
  return {
      json_target("model", "model descriptor / Hugging Face config.json (load_model_file, then sizes, ops, engine shape)",
                  model_seeds, run_model, 1 << 16, names_model),
      json_target("hardware", "hardware profile (load_hardware_file, then peaks and efficiencies)", hardware_seeds,
                  run_hardware),
      json_target("calibrated-profile", "calibrated profile (load_calibrated_tables, then steps priced for tiny)",
                  calibrated_seeds, run_calibrated, 1 << 18),
      json_target("cluster-config", "cluster config (load_cluster_config, then a 4-request simulation)", cluster_seeds,
                  run_cluster),
      json_target("speculative-config",
                  "--speculative-config JSON (parse_speculative_config, its echo read back, then a 4-request simulation)",
                  speculative_seeds, run_speculative, 1 << 12, names_speculative),
      json_target("search-file", "plan search file (load_search_file, then the candidates)", search_seeds, run_search),
  };
}

}  // namespace twin::fuzz
