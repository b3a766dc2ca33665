#include "engine/runtime/engine.hpp"

#include <algorithm>
#include <cstdio>

#include <filesystem>

#include "base/error.hpp"
#include "engine/core/kv_fit.hpp"
#include "engine/runtime/draft_proposer.hpp"
#include "engine/runtime/model_weights.hpp"
#include "engine/runtime/ngram_proposer.hpp"
#include "metrics/config_echo.hpp"
#include "models/model_desc.hpp"

namespace twin {
namespace {

std::string gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(std::int64_t{1} << 30));
  return buf;
}

// vLLM's start-up check on the KV cache the runner sized from memory (an
// override is taken as given): it must hold one request of max_model_len,
// which --max-model-len auto lowers to the largest that fits.
void check_start_up(const ModelRunner& runner, std::int32_t shares, bool auto_len, ReplicaConfig& rc) {
  const double block_bytes = static_cast<double>(runner.kv_block_bytes());
  const std::optional<KvMemoryPlan>& plan = runner.memory_plan();
  const double available = plan ? static_cast<double>(plan->kv_bytes) / shares
                                 : static_cast<double>(runner.num_blocks()) * block_bytes;
  KvFit fit = check_kv_fit(available, block_bytes, rc.kv.block_size, rc.scheduler.max_model_len);
  if (fit.fits()) return;
  if (auto_len && fit.largest_fitting > 1) {
    set_replica_option(rc, "max_model_len", std::to_string(fit.largest_fitting));
    return;
  }
  throw Error("vLLM would refuse to start: " + kv_fit_refusal(fit) + " (--max-model-len auto lowers it to what fits)");
}

}  // namespace

ModelConfig engine_model_config(const EngineSettings& s) {
  if (s.model_config) return *s.model_config;
  const std::string name = s.model.empty() ? s.runner.weights_dir : s.model;
  if (name.empty()) throw UsageError("the engine needs --model NAME (or --weights DIR holding a config.json)");
  return model_config_from(resolve_model(name));
}

namespace {

// Prefill and decode pools: checked again by the loop; here they fail
// before the weights load.
void check_pools(const std::vector<ReplicaRole>& roles, const EngineSettings& settings) {
  std::int32_t prefill = 0, decode = 0;
  for (const ReplicaRole r : roles) {
    if (r == ReplicaRole::mixed) throw UsageError("engine: a disaggregated engine has prefill and decode replicas only");
    (r == ReplicaRole::prefill ? prefill : decode) += 1;
  }
  if (decode == 0) throw UsageError("engine: prefill replicas need a decode replica");
  if (prefill == 0 && settings.disagg.mode != DisaggMode::never) {
    throw UsageError("engine: decode replicas need a prefill replica (or disaggregation mode 'never')");
  }
  // A draft model's KV mirrors one runner's blocks; moving it too is not built.
  if (settings.speculative) throw UsageError("--speculative-config: not with prefill and decode replicas in the engine");
  if (settings.time_ops) throw UsageError("engine: op timing runs one replica, not prefill and decode pools");
}

// What of a speculative config the engine cannot run, refused by name.
void check_engine_speculative(const SpeculativeConfig& spec, const EngineSettings& settings) {
  if (spec.method == SpeculativeMethod::eagle || spec.method == SpeculativeMethod::medusa) {
    const std::string name(speculative_method_name(spec.method));
    throw UsageError("--speculative-config: method " + name + " is the simulator's (the engine has no " +
                     (spec.method == SpeculativeMethod::eagle ? "EAGLE head" : "Medusa heads") +
                     " to run); the engine takes draft_model or ngram");
  }
  if (spec.num_draft_tokens > 0) {
    throw UsageError("--speculative-config: key 'num_draft_tokens' (a draft tree) is the simulator's; the engine "
                     "verifies a chain of num_speculative_tokens");
  }
  // The engine measures acceptance; the simulator's keys have no meaning here.
  const char* sim_key = spec.acceptance_rate >= 0     ? "acceptance_rate"
                        : spec.acceptance_length >= 0 ? "acceptance_length"
                        : !spec.acceptance_from.empty() ? "acceptance_from"
                        : !spec.draft_profile.empty()   ? "draft_profile"
                                                         : nullptr;
  if (sim_key) {
    throw UsageError(std::string("--speculative-config: key '") + sim_key +
                     "' is the simulator's; the engine measures acceptance itself");
  }
  if (settings.sampling.temperature > 0.0f) {
    throw UsageError("--speculative-config verifies proposals greedily: it needs --temperature 0 (rejection "
                     "sampling is not implemented)");
  }
}

// The draft model's runner for draft_model speculation.
std::unique_ptr<ModelRunner> make_draft_runner(const SpeculativeConfig& spec, const ModelConfig& target,
                                               const RunnerOptions& ro, const ModelRunner& runner,
                                               std::int32_t max_model_len) {
  const ModelConfig draft = model_config_from(resolve_model(spec.model));
  if (draft.vocab_size != target.vocab_size) {
    throw UsageError("--speculative-config: draft model '" + draft.name + "' has a vocabulary of " +
                     std::to_string(draft.vocab_size) + " tokens, the target '" + target.name + "' " +
                     std::to_string(target.vocab_size) + ": a draft must share the target's vocabulary");
  }
  if (draft.max_position_embeddings < max_model_len) {
    throw UsageError("--speculative-config: draft model '" + draft.name + "' has a context of " +
                     std::to_string(draft.max_position_embeddings) + " tokens, less than max_model_len " +
                     std::to_string(max_model_len));
  }
  // Its KV pool mirrors the target's blocks (the core's one block table
  // addresses both); its weights are the folder's where `model` is a
  // checkpoint folder, else random from the engine's seed.
  RunnerOptions d = ro;
  std::error_code ec;
  d.weights_dir = std::filesystem::is_directory(spec.model, ec) ? spec.model : "";
  d.num_blocks = runner.num_blocks();
  d.num_host_blocks = runner.num_host_blocks();
  d.kv_cache_memory_bytes = 0;
  d.swap_space_bytes = 0;
  return std::make_unique<ModelRunner>(draft, d);
}

}  // namespace

Engine::Engine(EngineSettings settings) : settings_(std::move(settings)) {
  model_ = engine_model_config(settings_);
  ReplicaConfig& rc = settings_.replica;
  validate(rc.scheduler);  // a bad scheduler setting fails before the weights load
  roles_ = settings_.roles.empty() ? std::vector<ReplicaRole>{ReplicaRole::mixed} : settings_.roles;
  if (disaggregated()) check_pools(roles_, settings_);
  RunnerOptions& ro = settings_.runner;
  ro.kv_cache_shares = num_replicas();
  ro.block_size = rc.kv.block_size;
  if (rc.kv.num_blocks > 0) ro.num_blocks = rc.kv.num_blocks;
  if (rc.kv.num_host_blocks > 0) ro.num_host_blocks = rc.kv.num_host_blocks;
  ro.max_num_batched_tokens = effective_token_budget(rc.scheduler);
  ro.max_num_seqs = rc.scheduler.max_num_seqs;
  const std::optional<SpeculativeConfig>& spec = settings_.speculative;
  if (spec) {
    check_engine_speculative(*spec, settings_);
    rc.scheduler.num_speculative_tokens = spec->num_speculative_tokens;
    validate(rc.scheduler);
    if (spec->method == SpeculativeMethod::ngram) (void)NgramProposer(spec->prompt_lookup_max, spec->prompt_lookup_min);
    // Every lookahead token of a decode is a sampled row.
    ro.max_num_seqs = std::min(ro.max_num_batched_tokens, rc.scheduler.max_num_seqs * (1 + spec->num_speculative_tokens));
  }
  const bool blocks_from_memory = rc.kv.num_blocks <= 0;
  runner_ = std::make_unique<ModelRunner>(model_, ro);
  ro = runner_->options();  // the resolved KV dtype and block counts
  if (blocks_from_memory) check_start_up(*runner_, num_replicas(), settings_.max_model_len_auto, rc);
  rc.kv.num_blocks = runner_->num_blocks();
  rc.kv.num_host_blocks = runner_->num_host_blocks();
  // KV tiers below the device: the core keeps their books and records the
  // copies, which the runner carries out (engine/runtime/kv_tier_store).
  rc.kv.tiers = runner_->kv_tier_configs();
  rc.kv.record_tier_copies = !rc.kv.tiers.empty();
  if (!rc.kv.tiers.empty() && spec && spec->method == SpeculativeMethod::draft_model) {
    throw UsageError("KV tiers below the device with a draft model are not built in the engine (its KV would "
                     "have to move too)");
  }
  validate(rc);
  runner_->set_time_ops(settings_.time_ops);
  for (std::int32_t i = 1; i < num_replicas(); ++i) siblings_.push_back(runner_->make_sibling());
  if (spec && spec->method == SpeculativeMethod::draft_model) {
    draft_runner_ = make_draft_runner(*spec, model_, ro, *runner_, rc.scheduler.max_model_len);
  }
}

std::unique_ptr<Proposer> Engine::make_proposer() {
  if (!settings_.speculative) return nullptr;
  const SpeculativeConfig& s = *settings_.speculative;
  if (s.method == SpeculativeMethod::ngram) return std::make_unique<NgramProposer>(s.prompt_lookup_max, s.prompt_lookup_min);
  return std::make_unique<DraftModelProposer>(*draft_runner_, *runner_);
}

Engine::~Engine() = default;

std::string Engine::description() const {
  const RunnerOptions& ro = settings_.runner;
  const bool quantized = !ro.quantization.empty() && ro.quantization != "none";
  return model_.name + " (" + runner_->weight_dtype_name() + " weights, " +
         (quantized ? quantization_label(ro.quantization) + ", " : std::string()) + runner_->kv_dtype_name() + " KV, " +
         (ro.weights_dir.empty() ? "random weights, seed " + std::to_string(ro.seed) : ro.weights_dir) + ") on " +
         runner_->device_name() + (runner_->uses_step_graphs() ? " with CUDA graphs" : "") + ", " +
         std::to_string(settings_.replica.kv.num_blocks) + " KV blocks of " +
         std::to_string(settings_.replica.kv.block_size) + " tokens" + (disaggregated() ? " per replica" : "") +
         ", preset " + settings_.replica.scheduler.preset + (disaggregated() ? ", " + pools_line() : "");
}

std::string Engine::pools_line() const {
  std::int32_t prefill = 0, decode = 0;
  for (const ReplicaRole r : roles_) (r == ReplicaRole::prefill ? prefill : decode) += 1;
  return std::to_string(prefill) + " prefill + " + std::to_string(decode) +
         " decode replicas (weights shared, one KV pool each, disaggregation " +
         std::string(disagg_mode_name(settings_.disagg.mode)) + ")";
}

std::string Engine::memory_plan_line() const {
  const std::optional<KvMemoryPlan>& p = runner_->memory_plan();
  if (!p) return "";
  char util[32];
  std::snprintf(util, sizeof util, "%g", settings_.runner.gpu_memory_utilization);
  return "memory plan on " + runner_->device_name() + ": " + util + " x device = " + gib(p->budget_bytes) + " - " +
         gib(p->in_use_bytes) + " in use - " + gib(p->weight_bytes) + " weights - " + gib(p->workspace_bytes) +
         " scratch and workspace = " + gib(p->kv_bytes) + " of KV (" + std::to_string(p->num_blocks) + " blocks of " +
         std::to_string(runner_->kv_block_bytes()) + " bytes" +
         (num_replicas() > 1 ? ", " + std::to_string(settings_.replica.kv.num_blocks) + " for each of " +
                                   std::to_string(num_replicas()) + " replicas"
                             : std::string()) +
         ")";
}

nlohmann::ordered_json Engine::config_echo() const {
  const RunnerOptions& ro = settings_.runner;
  const ReplicaConfig& rc = settings_.replica;
  nlohmann::ordered_json echo;
  echo["mode"] = "engine";
  echo["model"] = model_.name;
  echo["weights"] = ro.weights_dir.empty() ? "random" : ro.weights_dir;
  echo["weight_dtype"] = runner_->weight_dtype_name();
  echo["kv_cache_dtype"] = runner_->kv_dtype_name();
  echo["backend"] = ro.backend;
  echo["device"] = runner_->device_name();
  echo["seed"] = ro.seed;
  echo_replica(rc, rc.kv.num_blocks, echo);
  echo["num_host_blocks"] = rc.kv.num_host_blocks;
  echo["kv_block_bytes"] = runner_->kv_block_bytes();
  echo["weight_bytes"] = runner_->weight_bytes();
  if (runner_->memory_plan()) echo["gpu_memory_utilization"] = ro.gpu_memory_utilization;
  if (runner_->uses_step_graphs()) {
    // Replica 0's runner; sibling replicas keep their own graphs.
    const StepGraphStats& g = runner_->step_graph_stats();
    nlohmann::ordered_json graphs;
    graphs["recorded"] = g.recorded;
    graphs["replayed_steps"] = g.replays;
    graphs["fallbacks"] = g.failed;
    if (!g.first_failure.empty()) graphs["first_fallback"] = g.first_failure.substr(0, 200);
    echo["cuda_graphs"] = std::move(graphs);
  }
  echo["temperature"] = settings_.sampling.temperature;
  if (settings_.speculative) echo["speculative_config"] = speculative_config_json(*settings_.speculative);
  if (disaggregated()) {
    // The simulator's keys (docs/disaggregation.md): the roles in replica order.
    nlohmann::ordered_json roles = nlohmann::ordered_json::array();
    for (const ReplicaRole r : roles_) roles.push_back(std::string(replica_role_name(r)));
    echo["replica_roles"] = std::move(roles);
    nlohmann::ordered_json d;
    d["mode"] = std::string(disagg_mode_name(settings_.disagg.mode));
    d["conditional_threshold"] = settings_.disagg.conditional_threshold;
    d["kv_transfer"] = "whole";
    d["prefill_router"] = settings_.disagg.prefill_router;
    d["decode_router"] = settings_.disagg.decode_router;
    echo["disaggregation"] = std::move(d);
  }
  return echo;
}

DriveStats Engine::serve(RequestSource& source, RecordSink& sink, const DriveOptions& options) {
  const std::unique_ptr<Proposer> proposer = make_proposer();
  std::vector<std::unique_ptr<Executor>> executors;
  std::vector<Executor*> executor_ptrs;
  std::vector<Replica> replicas;
  replicas.reserve(roles_.size());
  for (std::size_t i = 0; i < roles_.size(); ++i) {
    ModelRunner& runner = i == 0 ? *runner_ : *siblings_[i - 1];
    executors.push_back(std::make_unique<Executor>(runner, settings_.sampling, proposer.get()));
    executor_ptrs.push_back(executors.back().get());
    ReplicaConfig rc = settings_.replica;
    rc.role = roles_[i];
    replicas.emplace_back(rc, static_cast<std::int32_t>(i));
  }
  DriveOptions o = options;
  o.disagg = settings_.disagg;
  const DriveStats stats = drive_wall_clock(replicas, executor_ptrs, source, sink, o);
  step_op_ns_ = executors.front()->step_op_times();
  const KvCache& kv = replicas.front().kv_cache();
  last_kv_stats_ = kv.stats();
  last_tier_stats_.clear();
  for (std::size_t t = 0; t < kv.tiers().size(); ++t) last_tier_stats_.push_back(kv.tiers().stats(t));
  return stats;
}

}  // namespace twin
