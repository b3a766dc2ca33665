#include "engine/runtime/model_runner.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "engine/backend/backend.hpp"
#include "engine/backend/cuda/memory_plan.hpp"
#include "engine/runtime/forward_calls.hpp"
#include "engine/runtime/kv_tier_store.hpp"
#include "engine/runtime/model_weights.hpp"
#include "engine/runtime/step_graph_batch.hpp"

namespace twin {
namespace {

// Workspaces a device backend grows lazily during the first steps at the
// scheduler's limits, which the memory plan must leave free: the bf16 copy
// of a GEMM's input (grown by doubling), MoE routing rows, the sampler's sort
// space, the attention split-K partials (bounded at 256 MiB) and 512 MiB for
// cuBLAS and allocator slack.
std::int64_t backend_workspace_bytes(const ModelConfig& m, std::int64_t T, std::int64_t S) {
  const std::int64_t H = m.hidden_size, I = m.intermediate_size;
  const std::int64_t K = std::max<std::int64_t>(m.experts_per_token, 1);
  const std::int64_t gemm_in = 2 * T * std::max({H, I, m.q_dim()}) * 2;
  const std::int64_t moe = m.is_moe() ? 2 * T * K * (2 * H + 3 * I) * 4 : 0;
  return gemm_in + moe + sampling_workspace_bytes(m.vocab_size, S) + (std::int64_t{768} << 20);
}

constexpr std::int64_t kCpuKvBytes = std::int64_t{1} << 30;  // the CPU has no memory plan: 1 GiB of KV
constexpr std::int32_t kMaxGraphRows = 512;  // vLLM's largest capture size

}  // namespace

ElemType kv_elem_type(const std::string& resolved) {
  if (resolved == "bf16") return ElemType::bf16;
  if (resolved == "fp8_e4m3") return ElemType::f8e4m3;
  return ElemType::f32;
}

std::string resolve_kv_cache_dtype(const std::string& requested, const std::string& weight_dtype) {
  // fp8 is a KV format only (per-tensor scales, engine/backend/dtype.hpp):
  // vLLM's "fp8" and "fp8_e4m3" are E4M3; E5M2 is not stored.
  if (requested == "fp8" || requested == "fp8_e4m3") return "fp8_e4m3";
  if (requested == "fp8_e5m2") {
    throw UsageError("--kv-cache-dtype fp8_e5m2: the engine stores an fp8 KV cache as E4M3 only (use fp8 or fp8_e4m3)");
  }
  const std::string d = engine_storage_dtype(requested, "--kv-cache-dtype");
  if (d == "auto") return engine_storage_dtype(weight_dtype, "--dtype") == "bf16" ? "bf16" : "f32";
  return d;
}

std::int64_t kv_block_bytes(const ModelConfig& c, std::int32_t block_size, const std::string& kv_dtype) {
  return 2 * c.num_layers * c.kv_dim() * block_size *
         static_cast<std::int64_t>(elem_bytes(kv_elem_type(resolve_kv_cache_dtype(kv_dtype, "f32"))));
}

struct ModelRunner::Impl {
  ModelConfig config;
  RunnerOptions options;
  // Shared with sibling runners (make_sibling): declared first, so a
  // runner's buffers are released before the last owner drops the backend.
  std::shared_ptr<Backend> backend;
  std::shared_ptr<const ModelWeights> weights;
  Buffer kv_device, kv_host;
  std::string kv_dtype;  // resolved: f32, bf16 or fp8_e4m3
  std::vector<KvCacheView> device_layers, host_layers;
  std::unique_ptr<KvTierStore> tiers;  // KV tiers below the device; null without
  ForwardScratch scratch;
  std::optional<KvMemoryPlan> plan;  // where the device's memory sized the KV cache
  AttentionShape attention;
  RopeConfig rope;
  // Per-step host metadata, reused across steps.
  StepRows step;
  std::vector<SamplingParams> sampling;
  // Step graphs (RunnerOptions::cuda_graphs): decode steps padded to a
  // bucket of rows replay a graph per (rows, context) bucket. Padding rows
  // attend to block 0 (pad_table) and write nothing. A key whose graph
  // failed runs eagerly from then on.
  bool graphs = false;
  std::int32_t graph_max_rows = 0;
  const std::vector<BlockId> pad_table{0};
  std::set<StepGraphKey> eager_keys;
  StepGraphStats graph_stats;
  // Graphs are keyed by this Impl's address: drop them before another
  // runner can have it.
  ~Impl() {
    if (backend) backend->clear_step_graphs(this);
  }
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  std::vector<TensorView> expert_gate_up, expert_down;

  // `flags`: what sizes this cache, named in the error when it cannot be allocated.
  std::vector<KvCacheView> make_cache(Buffer& buffer, std::int64_t num_blocks, MemoryKind kind, const char* what,
                                      const char* flags) {
    std::vector<KvCacheView> layers;
    if (num_blocks <= 0) return layers;
    KvCacheView proto;
    proto.dtype = kv_elem_type(kv_dtype);
    proto.num_blocks = num_blocks;
    proto.block_size = options.block_size;
    proto.kv_heads = static_cast<std::int32_t>(config.num_kv_heads);
    proto.head_dim = static_cast<std::int32_t>(config.head_dim);
    const std::size_t per_tensor = static_cast<std::size_t>(proto.bytes_per_tensor());
    try {
      buffer = backend->allocate(per_tensor * 2 * static_cast<std::size_t>(config.num_layers), kind);
    } catch (const Error& e) {
      throw Error(std::string(what) + " (" + std::to_string(num_blocks) + " blocks of " + std::to_string(options.block_size) +
                  " tokens, " + kv_dtype + "): " + e.what() + "; " + flags + " set a smaller size");
    }
    for (std::int64_t l = 0; l < config.num_layers; ++l) {
      KvCacheView v = proto;
      v.k = static_cast<char*>(buffer.data()) + per_tensor * static_cast<std::size_t>(2 * l);
      v.v = static_cast<char*>(buffer.data()) + per_tensor * static_cast<std::size_t>(2 * l + 1);
      layers.push_back(v);
    }
    return layers;
  }

  void check_batch(const ForwardBatch& batch) const {
    std::int64_t total = 0;
    for (const BatchSeq& s : batch.seqs) {
      const std::string who = "request " + std::to_string(s.id);
      if (s.num_new <= 0 || s.start < 0) throw Error(who + ": empty token range in the step");
      if (s.samples && (s.num_sampled < 1 || s.num_sampled > s.num_new)) {
        throw Error(who + ": samples " + std::to_string(s.num_sampled) + " rows of " + std::to_string(s.num_new) +
                    " new tokens");
      }
      const std::int64_t context = static_cast<std::int64_t>(s.start) + s.num_new;
      if (context > config.max_position_embeddings) {
        throw Error(who + ": position " + std::to_string(context - 1) + " beyond the model's context " +
                    std::to_string(config.max_position_embeddings));
      }
      const std::int64_t need = (context + options.block_size - 1) / options.block_size;
      if (static_cast<std::int64_t>(s.block_table.size()) < need) {
        throw Error(who + ": block table holds " + std::to_string(s.block_table.size()) + " blocks, " +
                    std::to_string(need) + " needed for " + std::to_string(context) + " tokens");
      }
      for (std::int64_t b = 0; b < need; ++b) {
        const BlockId id = s.block_table[static_cast<std::size_t>(b)];
        if (id < 0 || id >= options.num_blocks) {
          throw Error(who + ": block id " + std::to_string(id) + " outside the cache of " +
                      std::to_string(options.num_blocks) + " blocks");
        }
      }
      total += s.num_new;
    }
    if (total != static_cast<std::int64_t>(batch.tokens.size())) {
      throw Error("forward batch: " + std::to_string(batch.tokens.size()) + " tokens for " + std::to_string(total) +
                  " scheduled");
    }
    for (TokenId t : batch.tokens) {
      if (t < 0 || t >= config.vocab_size) {
        throw Error("forward batch: token id " + std::to_string(t) + " outside the vocabulary of " +
                    std::to_string(config.vocab_size));
      }
    }
  }

  // Op timing (set_time_ops): the backend records a mark after each op
  // (begin_timing records mark 0 before the first) and the marks are read
  // once, at the end of the pass (end_timing): the op charged with the gap
  // ending at mark i is mark_ops[i]. No synchronisation between ops, so a
  // GPU's queue runs as in an untimed step.
  bool time_ops = false;
  std::vector<TimedOp> mark_ops;
  std::vector<double> mark_ns;
  void begin_timing() {
    if (!time_ops) return;
    // Mark 0, then one per call of the program (the layer's once per layer).
    std::size_t marks = 1;
    for (ForwardCall call : forward_program(config.is_moe(), config.qk_norm))
      marks += call_info(call).part == CallPart::layer ? weights->layers.size() : 1;
    backend->begin_op_timing(marks);
    mark_ops.clear();
    mark_ops.push_back(TimedOp::embed);  // mark 0 ends no op
    backend->mark_op(0);
  }
  void tick(TimedOp op) {
    if (!time_ops) return;
    backend->mark_op(mark_ops.size());
    mark_ops.push_back(op);
  }
  void end_timing(ForwardOutput& out) {
    if (!time_ops) return;
    mark_ns.assign(mark_ops.size(), 0.0);
    backend->read_op_marks(mark_ns);
    for (std::size_t i = 1; i < mark_ops.size(); ++i) {
      // Clamped: marks never run backwards, but a negative gap must not leak.
      out.op_ns[static_cast<std::size_t>(mark_ops[i])] += std::max(0.0, mark_ns[i] - mark_ns[i - 1]);
    }
  }

  // The step's rows: each token's position and KV slot, each seq's
  // attention rows, the rows it samples and their settings. Returns the
  // rows and the longest context.
  std::pair<std::int32_t, std::int32_t> lay_out_step(const ForwardBatch& batch) {
    step.positions.clear();
    step.slots.clear();
    step.attention.clear();
    step.sample_rows.clear();
    sampling.clear();
    std::int32_t row = 0, max_context = 0;
    const std::int32_t bs = options.block_size;
    for (const BatchSeq& s : batch.seqs) {
      for (std::int32_t i = 0; i < s.num_new; ++i) {
        const std::int32_t pos = s.start + i;
        step.positions.push_back(pos);
        step.slots.push_back(static_cast<std::int64_t>(s.block_table[static_cast<std::size_t>(pos / bs)]) * bs + pos % bs);
      }
      step.attention.push_back({row, s.num_new, s.start + s.num_new, s.block_table});
      max_context = std::max(max_context, s.start + s.num_new);
      row += s.num_new;
      if (s.samples) {
        for (std::int32_t i = 0; i < s.num_sampled; ++i) {
          step.sample_rows.push_back(row - s.num_sampled + i);
          sampling.push_back({s.temperature, s.top_k, s.top_p, s.seed, s.id, s.token_index + i});
        }
      }
    }
    return {row, max_context};
  }

  // Each dimension grows (doubling) only when it must: growing both
  // whenever either did once compounded the token rows to 2^17 and more
  // (34 GB on Llama-3.1-8B) as the sampled rows grew.
  void ensure_scratch(std::int64_t T, std::int64_t S) {
    if (T <= scratch.tokens && S <= scratch.samples) return;
    carve_scratch(*backend, config, T > scratch.tokens ? std::max(T, scratch.tokens * 2) : scratch.tokens,
                  S > scratch.samples ? std::max<std::int64_t>({S, scratch.samples * 2, 1}) : scratch.samples, 1, scratch);
    backend->clear_step_graphs(this);  // they wrote the old activations
  }

  ForwardArgs forward_args(const ForwardBatch& batch, bool padded, ForwardOutput& out) {
    ForwardArgs args;
    args.backend = backend.get();
    args.config = &config;
    args.weights = weights.get();
    args.scratch = &scratch;
    args.tokens = static_cast<std::int64_t>(step.positions.size());
    args.samples = static_cast<std::int64_t>(step.sample_rows.size());
    args.ids = padded ? std::span<const TokenId>(step.ids) : std::span<const TokenId>(batch.tokens);
    args.positions = step.positions;
    args.slots = step.slots;
    args.attention_seqs = step.attention;
    args.kv = device_layers;
    args.sample_rows = step.sample_rows;
    args.sampling = sampling;
    out.sampled.resize(sampling.size());
    args.sampled = out.sampled;
    args.attention = attention;
    args.rope = rope;
    args.eps = static_cast<float>(config.rms_norm_eps);
    return args;
  }

  // The padded path: every call but sampling over the padded rows (through
  // a graph where one is kept), then the real rows sampled.
  void run_padded(ForwardArgs& args, std::span<const ForwardCall> program, std::int32_t bucket,
                  std::int32_t max_context) {
    auto pass = [&] {
      for (ForwardCall call : program)
        if (call_info(call).part == CallPart::prologue) run_call(call, args, 0);
      for (std::size_t l = 0; l < weights->layers.size(); ++l)
        for (ForwardCall call : program)
          if (call_info(call).part == CallPart::layer) run_call(call, args, l);
      for (ForwardCall call : program)
        if (call_info(call).part == CallPart::epilogue && call != ForwardCall::sample) run_call(call, args, 0);
    };
    const auto model_context =
        static_cast<std::int32_t>(std::min<std::int64_t>(config.max_position_embeddings, INT32_MAX));
    const StepGraphKey key{this, bucket, graph_context_bucket(max_context, model_context)};
    if (!graphs || !graph_pass(key, pass)) pass();
    args.samples = static_cast<std::int64_t>(sampling.size());
    run_call(ForwardCall::sample, args, 0);
  }

  // The forward program: the prologue, its layer part once per layer, the
  // epilogue (its sampling calls only where a seq samples), each op timed
  // where set_time_ops asks.
  void run_program(const ForwardArgs& args, std::span<const ForwardCall> program, ForwardOutput& out) {
    const std::int64_t S = args.samples;
    begin_timing();
    auto run = [&](ForwardCall call, std::size_t layer) {
      run_call(call, args, layer);
      tick(call_info(call).timed);
    };
    for (ForwardCall call : program)
      if (call_info(call).part == CallPart::prologue) run(call, 0);
    for (std::size_t l = 0; l < weights->layers.size(); ++l)
      for (ForwardCall call : program)
        if (call_info(call).part == CallPart::layer) run(call, l);
    for (ForwardCall call : program) {
      const ForwardCallInfo& info = call_info(call);
      if (info.part == CallPart::epilogue && (S > 0 || info.rows != CallRows::sampling)) run(call, 0);
    }
    if (S == 0) backend->synchronize();  // sample() waits for the pass; a pass that samples nothing must too
    end_timing(out);
  }

  void forward(const ForwardBatch& batch, ForwardOutput& out) {
    check_batch(batch);
    out.sampled.clear();
    out.logits.clear();
    out.op_ns.fill(0.0);
    if (batch.tokens.empty()) return;
    const auto [rows, max_context] = lay_out_step(batch);
    // A decode step padded to a graph's rows (on the CPU only where
    // pad_decode_steps asks, to check the padding): the padding rows' logits
    // are computed and never sampled.
    const bool padded_path = (graphs || options.pad_decode_steps) && !time_ops && !config.is_moe() &&
                             graph_eligible(batch);
    const std::int32_t bucket = padded_path ? graph_rows_bucket(rows, graph_max_rows) : 0;
    if (bucket > 0) {
      step.ids.assign(batch.tokens.begin(), batch.tokens.end());
      pad_step_rows(step, bucket, pad_table);
    }
    ensure_scratch(static_cast<std::int64_t>(step.positions.size()), static_cast<std::int64_t>(step.sample_rows.size()));
    ForwardArgs args = forward_args(batch, bucket > 0, out);
    const std::span<const ForwardCall> program = forward_program(config.is_moe(), config.qk_norm);
    if (bucket > 0) {
      run_padded(args, program, bucket, max_context);
    } else {
      run_program(args, program, out);
    }
    const auto sampled = static_cast<std::int64_t>(sampling.size());
    if (batch.return_logits && sampled > 0) {
      out.logits.resize(static_cast<std::size_t>(sampled * config.vocab_size));
      backend->download(out.logits.data(), scratch.logits.data, out.logits.size() * sizeof(float));
    }
  }

  // Runs `pass` (the step's ops up to the logits) through the key's graph:
  // replayed where the backend keeps one; else run in the key's layout and
  // recorded. False where the step must run eagerly instead: a replay that
  // failed launched nothing, and a warm pass that failed is simply run
  // again (its KV writes and activations are rewritten alike). The key then
  // stays eager.
  template <typename Pass>
  bool graph_pass(const StepGraphKey& key, Pass&& pass) {
    if (eager_keys.count(key) > 0) return false;
    const bool replay = backend->has_step_graph(key);
    try {
      backend->begin_step_graph(key, replay ? StepGraphPass::replay : StepGraphPass::warm);
      pass();
      backend->end_step_graph();
    } catch (const Error& e) {
      backend->abort_step_graph();
      give_up_graph(key, e.what());
      return false;
    }
    if (replay) {
      ++graph_stats.replays;
      return true;
    }
    // The warm pass computed this step; record the graph for the next ones.
    try {
      backend->begin_step_graph(key, StepGraphPass::record);
      pass();
      backend->end_step_graph();
      ++graph_stats.recorded;
    } catch (const Error& e) {
      backend->abort_step_graph();
      give_up_graph(key, e.what());
    }
    return true;
  }

  void give_up_graph(const StepGraphKey& key, const std::string& why) {
    eager_keys.insert(key);
    ++graph_stats.failed;
    if (graph_stats.first_failure.empty()) graph_stats.first_failure = why;
  }

  void plan_kv_blocks(const DeviceInfo& before, std::int64_t block_bytes);  // below, with the constructor
  void make_tiers(std::int64_t block_bytes);

  void move_blocks(const std::vector<KvCacheView>& src, const std::vector<KvCacheView>& dst,
                   std::span<const BlockCopy> moves, std::int64_t src_blocks, std::int64_t dst_blocks) {
    if (moves.empty()) return;
    if (host_layers.empty()) throw Error("swap requested but the runner has no host swap space (num_host_blocks = 0)");
    for (const BlockCopy& m : moves) {
      if (m.src < 0 || m.src >= src_blocks || m.dst < 0 || m.dst >= dst_blocks) {
        throw Error("swap copy " + std::to_string(m.src) + " -> " + std::to_string(m.dst) + " outside the caches");
      }
    }
    for (std::size_t l = 0; l < src.size(); ++l) backend->copy_blocks(src[l], dst[l], moves);
  }
};

namespace {

void check_runner_options(const RunnerOptions& options) {
  if (options.num_blocks < 0) throw UsageError("num_gpu_blocks must be >= 0 (0: planned from memory)");
  if (options.kv_cache_memory_bytes < 0) throw UsageError("--kv-cache-memory-bytes must be >= 0");
  if (options.swap_space_bytes < 0) throw UsageError("--swap-space must be >= 0 GiB");
  if (options.block_size < 1) throw UsageError("block size must be at least 1");
  if (options.kv_cache_shares < 1) throw UsageError("the runner's kv_cache_shares must be >= 1");
  if (options.max_num_batched_tokens < 0 || options.max_num_seqs < 0) {
    throw UsageError("the runner's max_num_batched_tokens and max_num_seqs must be >= 0");
  }
  if (options.kv_offload_dram_bytes < 0 || options.kv_offload_ssd_bytes < 0) {
    throw UsageError("--kv-offload-dram-gib and --kv-offload-ssd-gib must be >= 0");
  }
  resolve_kv_cache_dtype(options.kv_cache_dtype, "f32");  // a bad name fails before the weights load
}

}  // namespace

// The KV blocks: as given, from a byte budget (the CPU's default one), or
// vLLM's plan from the device's measured memory (`before`: the device
// before the weights loaded).
void ModelRunner::Impl::plan_kv_blocks(const DeviceInfo& before, std::int64_t block_bytes) {
  const std::int64_t T = options.max_num_batched_tokens, S = options.max_num_seqs;
  if (options.num_blocks > 0) {
    if (options.kv_cache_memory_bytes > 0) {
      throw UsageError("--num-gpu-blocks-override and --kv-cache-memory-bytes contradict");
    }
  } else if (options.kv_cache_memory_bytes > 0 || backend->name() == "cpu") {
    const std::int64_t bytes = options.kv_cache_memory_bytes > 0 ? options.kv_cache_memory_bytes : kCpuKvBytes;
    if (bytes < block_bytes) {
      throw UsageError("--kv-cache-memory-bytes " + std::to_string(bytes) + " holds no KV block of " +
                       std::to_string(block_bytes) + " bytes");
    }
    options.num_blocks = static_cast<std::int32_t>(std::min<std::int64_t>(bytes / block_bytes, 1 << 30));
  } else {
    // vLLM's plan, from measured figures: the weights and the scratch are
    // already allocated, so only the backend's lazily grown workspaces are
    // estimated.
    const DeviceInfo now = backend->device_info();
    const std::int64_t held = std::max<std::int64_t>(0, before.free_bytes - now.free_bytes);
    plan = plan_kv_memory(now.total_bytes, before.free_bytes, options.gpu_memory_utilization, weights->bytes,
                          std::max<std::int64_t>(0, held - weights->bytes) +
                              backend_workspace_bytes(config, std::max<std::int64_t>(T, 8192),
                                                      std::max<std::int64_t>(S, 256)),
                          block_bytes);
    // Replicas in one process split the planned KV evenly (their siblings
    // allocate as many blocks, from the memory this one leaves).
    options.num_blocks = static_cast<std::int32_t>(std::min<std::int64_t>(plan->num_blocks / options.kv_cache_shares, 1 << 30));
    if (options.num_blocks < 1) {
      throw Error("KV memory plan: " + std::to_string(plan->num_blocks) + " blocks do not split over " +
                  std::to_string(options.kv_cache_shares) + " replicas");
    }
  }
  if (options.num_host_blocks <= 0 && options.swap_space_bytes > 0) {
    options.num_host_blocks = static_cast<std::int32_t>(std::min<std::int64_t>(options.swap_space_bytes / block_bytes, 1 << 30));
  }
}

// The KV tiers below the device (host DRAM, local SSD) that the options ask for.
void ModelRunner::Impl::make_tiers(std::int64_t block_bytes) {
  std::vector<KvTierStoreConfig> list;
  for (const auto& [name, bytes] : {std::pair{"dram", options.kv_offload_dram_bytes},
                                    std::pair{"ssd", options.kv_offload_ssd_bytes}}) {
    if (bytes == 0) continue;
    const std::int64_t blocks = bytes / block_bytes;
    if (blocks < 1) {
      throw UsageError(std::string("--kv-offload-") + name + "-gib holds no KV block of " + std::to_string(block_bytes) +
                       " bytes");
    }
    list.push_back({name, std::min<std::int64_t>(blocks, 1 << 30), options.kv_offload_ssd_dir});
  }
  if (!list.empty()) tiers = std::make_unique<KvTierStore>(*backend, device_layers, std::move(list));
}

ModelRunner::ModelRunner(const ModelConfig& config, const RunnerOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  check_model_config(config);
  check_runner_options(options);
  m.config = config;
  m.options = options;
  BackendOptions backend_options;
  backend_options.threads = options.threads;
  m.backend = make_backend(options.backend, backend_options);
  const DeviceInfo before = m.backend->device_info();
  WeightOptions w;
  w.dir = options.weights_dir;
  w.seed = options.seed;
  w.dtype = options.weight_dtype;
  w.quantization = options.quantization;
  m.weights = std::make_shared<const ModelWeights>(load_model_weights(*m.backend, config, w));
  m.kv_dtype = resolve_kv_cache_dtype(options.kv_cache_dtype, std::string(elem_type_name(m.weights->embed.dtype)));
  m.options.kv_cache_dtype = m.kv_dtype;
  const std::int64_t T = options.max_num_batched_tokens, S = options.max_num_seqs;
  if (T > 0 || S > 0) {
    carve_scratch(*m.backend, config, std::max<std::int64_t>(T, 1), std::max<std::int64_t>(S, 1), 1, m.scratch);
  }
  const std::int64_t block_bytes = twin::kv_block_bytes(config, options.block_size, m.kv_dtype);
  m.plan_kv_blocks(before, block_bytes);
  m.device_layers = m.make_cache(m.kv_device, m.options.num_blocks, MemoryKind::device, "the KV cache",
                                 "--kv-cache-memory-bytes or --num-gpu-blocks-override");
  m.host_layers = m.make_cache(m.kv_host, m.options.num_host_blocks, MemoryKind::host, "the host swap space", "--swap-space");
  m.make_tiers(block_bytes);
  if (options.cuda_graphs && !m.backend->supports_step_graphs() && options.backend != "auto") {
    throw UsageError("--cuda-graphs: the " + m.backend->name() + " backend has no step graphs (CUDA graphs need --backend cuda)");
  }
  m.graphs = options.cuda_graphs && m.backend->supports_step_graphs();
  m.graph_max_rows = options.max_num_seqs > 0 ? std::min(options.max_num_seqs, kMaxGraphRows) : kMaxGraphRows;
  m.attention.num_heads = static_cast<std::int32_t>(config.num_heads);
  m.attention.num_kv_heads = static_cast<std::int32_t>(config.num_kv_heads);
  m.attention.head_dim = static_cast<std::int32_t>(config.head_dim);
  m.attention.sliding_window = static_cast<std::int32_t>(std::min<std::int64_t>(config.sliding_window, INT32_MAX));
  m.rope = rope_config(config);
}

ModelRunner::ModelRunner(ModelRunner& shared) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const Impl& o = *shared.impl_;
  m.config = o.config;
  m.options = o.options;
  m.backend = o.backend;
  m.weights = o.weights;
  m.kv_dtype = o.kv_dtype;
  m.attention = o.attention;
  m.rope = o.rope;
  m.time_ops = o.time_ops;
  m.graphs = o.graphs;
  m.graph_max_rows = o.graph_max_rows;
  const std::int64_t T = m.options.max_num_batched_tokens, S = m.options.max_num_seqs;
  if (T > 0 || S > 0) {
    carve_scratch(*m.backend, m.config, std::max<std::int64_t>(T, 1), std::max<std::int64_t>(S, 1), 1, m.scratch);
  }
  m.device_layers = m.make_cache(m.kv_device, m.options.num_blocks, MemoryKind::device, "a sibling replica's KV cache",
                                 "--kv-cache-memory-bytes or --num-gpu-blocks-override");
  m.host_layers = m.make_cache(m.kv_host, m.options.num_host_blocks, MemoryKind::host,
                               "a sibling replica's host swap space", "--swap-space");
}

std::unique_ptr<ModelRunner> ModelRunner::make_sibling() {
  if (impl_->tiers) {
    throw UsageError("KV tiers below the device with prefill and decode replicas are not built in the engine "
                     "(the simulator prices them)");
  }
  return std::unique_ptr<ModelRunner>(new ModelRunner(*this));
}

std::vector<KvTierConfig> ModelRunner::kv_tier_configs() const {
  return impl_->tiers ? impl_->tiers->core_configs() : std::vector<KvTierConfig>{};
}

void ModelRunner::apply_tier_copies(std::span<const TierCopy> copies) {
  if (copies.empty()) return;
  if (!impl_->tiers) throw Error("KV tier copies for a runner without tiers");
  impl_->tiers->apply(copies, impl_->device_layers);
}

void ModelRunner::copy_kv_from(const ModelRunner& source, std::span<const BlockCopy> pairs) {
  Impl& m = *impl_;
  const Impl& src = *source.impl_;
  if (src.backend != m.backend || src.device_layers.size() != m.device_layers.size()) {
    throw Error("KV copy between runners: they must be siblings (one backend, one model)");
  }
  if (pairs.empty()) return;
  for (const BlockCopy& p : pairs) {
    if (p.src < 0 || p.src >= src.options.num_blocks || p.dst < 0 || p.dst >= m.options.num_blocks) {
      throw Error("KV copy " + std::to_string(p.src) + " -> " + std::to_string(p.dst) + " outside the caches");
    }
  }
  for (std::size_t l = 0; l < m.device_layers.size(); ++l) m.backend->copy_blocks(src.device_layers[l], m.device_layers[l], pairs);
  m.backend->synchronize();  // the KV is there when this returns: the caller times it
}

ModelRunner::~ModelRunner() = default;

const ModelConfig& ModelRunner::config() const { return impl_->config; }
const RunnerOptions& ModelRunner::options() const { return impl_->options; }
std::string ModelRunner::device_name() const { return impl_->backend->device_info().name; }
std::string ModelRunner::backend_name() const { return impl_->backend->name(); }
std::int64_t ModelRunner::weight_bytes() const { return impl_->weights->bytes; }
std::int64_t ModelRunner::kv_block_bytes() const {
  return twin::kv_block_bytes(impl_->config, impl_->options.block_size, impl_->kv_dtype);
}
std::string ModelRunner::weight_dtype_name() const { return std::string(elem_type_name(impl_->weights->embed.dtype)); }
std::string ModelRunner::kv_dtype_name() const { return impl_->kv_dtype; }
std::int64_t ModelRunner::scratch_bytes() const { return static_cast<std::int64_t>(impl_->scratch.storage.bytes()); }
std::int32_t ModelRunner::num_blocks() const { return impl_->options.num_blocks; }
std::int32_t ModelRunner::num_host_blocks() const { return impl_->options.num_host_blocks; }
const std::optional<KvMemoryPlan>& ModelRunner::memory_plan() const { return impl_->plan; }

void ModelRunner::forward(const ForwardBatch& batch, ForwardOutput& out) { impl_->forward(batch, out); }

void ModelRunner::set_time_ops(bool on) { impl_->time_ops = on; }
bool ModelRunner::times_ops() const { return impl_->time_ops; }
std::int32_t ModelRunner::device_threads() const { return impl_->backend->device_info().threads; }
bool ModelRunner::uses_step_graphs() const { return impl_->graphs; }
const StepGraphStats& ModelRunner::step_graph_stats() const { return impl_->graph_stats; }

void ModelRunner::swap_out(std::span<const BlockCopy> moves) {
  impl_->move_blocks(impl_->device_layers, impl_->host_layers, moves, impl_->options.num_blocks,
                     impl_->options.num_host_blocks);
}

void ModelRunner::swap_in(std::span<const BlockCopy> moves) {
  impl_->move_blocks(impl_->host_layers, impl_->device_layers, moves, impl_->options.num_host_blocks,
                     impl_->options.num_blocks);
}

}  // namespace twin
