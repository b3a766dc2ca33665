#include "engine/profiler/op_bench.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/error.hpp"
#include "engine/runtime/forward_calls.hpp"
#include "engine/runtime/model_runner.hpp"
#include "engine/runtime/model_weights.hpp"

namespace twin {
namespace {

// A single call shorter than this is repeated over the layers inside one
// timed run (also averaging the clock's granularity away).
constexpr double kCycleBelowNs = 1e6;

}  // namespace

struct OpBench::Impl {
  ModelConfig config;
  OpBenchOptions options;
  std::unique_ptr<Backend> backend;
  ModelWeights weights;
  ForwardScratch scratch;
  Buffer kv;
  KvCacheView cache;
  std::string kv_dtype;  // resolved: f32, bf16 or fp8_e4m3
  std::vector<TokenId> ids, sampled;
  std::vector<std::int32_t> positions, rows;
  std::vector<std::int64_t> slots;
  std::vector<BlockId> tables;
  std::vector<SeqAttention> seqs;
  std::vector<SamplingParams> sampling;
  ForwardArgs args;

  void carve() {
    const std::int64_t T = options.max_tokens, S = options.max_seqs;
    // A MoE's expert GEMMs are timed apart, on tokens x top_k rows.
    carve_scratch(*backend, config, T, S, config.is_moe() ? std::max<std::int64_t>(config.experts_per_token, 1) : 1,
                  scratch);
    // Small finite values: no NaN or denormal slow paths in the timed
    // kernels. The routing ids are integers: expert 0, 1, ... in turn.
    for (const TensorView* v : {&scratch.x, &scratch.h, &scratch.delta, &scratch.qkv, &scratch.attn, &scratch.gate_up,
                                &scratch.act, &scratch.router_logits, &scratch.topk_weights, &scratch.xs, &scratch.hs,
                                &scratch.logits}) {
      backend->fill(*v, 0.01f);
    }
    std::vector<std::int32_t> expert_ids(static_cast<std::size_t>(scratch.topk_ids.rows * scratch.topk_ids.cols));
    for (std::size_t i = 0; i < expert_ids.size(); ++i) {
      expert_ids[i] = static_cast<std::int32_t>(i % static_cast<std::size_t>(std::max<std::int64_t>(config.num_experts, 1)));
    }
    backend->upload(scratch.topk_ids.data, expert_ids.data(), expert_ids.size() * sizeof(std::int32_t));
    ids.resize(static_cast<std::size_t>(T));
    positions.resize(static_cast<std::size_t>(T));
    for (std::int64_t i = 0; i < T; ++i) {
      ids[static_cast<std::size_t>(i)] = static_cast<TokenId>(i % config.vocab_size);
      positions[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % config.max_position_embeddings);
    }
    rows.resize(static_cast<std::size_t>(S));
    for (std::int64_t i = 0; i < S; ++i) rows[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
    sampled.resize(static_cast<std::size_t>(S));
    sampling.resize(static_cast<std::size_t>(S));
    for (std::int64_t i = 0; i < S; ++i) sampling[static_cast<std::size_t>(i)].request = i;
  }

  // One layer's paged cache with at least `blocks` blocks, zeroed.
  void ensure_cache(std::int64_t blocks) {
    if (kv && cache.num_blocks >= blocks) return;
    kv = Buffer();
    cache = KvCacheView{};
    cache.dtype = kv_elem_type(kv_dtype);
    cache.num_blocks = std::max<std::int64_t>(blocks, 1);
    cache.block_size = options.block_size;
    cache.kv_heads = static_cast<std::int32_t>(config.num_kv_heads);
    cache.head_dim = static_cast<std::int32_t>(config.head_dim);
    const auto per = static_cast<std::size_t>(cache.bytes_per_tensor());
    kv = backend->allocate(2 * per);
    cache.k = kv.data();
    cache.v = static_cast<char*>(kv.data()) + per;
    // Zero bits are 0.0 in every dtype: fill the tensors as f32 words.
    const auto words = static_cast<std::int64_t>(per / sizeof(float));
    backend->fill(make_view(cache.k, ElemType::f32, 1, words), 0.0f);
    backend->fill(make_view(cache.v, ElemType::f32, 1, words), 0.0f);
  }

  // Seqs of `num_query` new tokens after `context` cached ones each, with
  // disjoint block tables; fills slots for the new tokens.
  void layout_attention(std::int64_t num_seqs, std::int64_t num_query, std::int64_t context) {
    const std::int64_t bs = options.block_size;
    const std::int64_t len = context + num_query;
    const std::int64_t per_seq = (len + bs - 1) / bs;
    ensure_cache(per_seq * num_seqs);
    tables.resize(static_cast<std::size_t>(per_seq * num_seqs));
    for (std::size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<BlockId>(i);
    seqs.clear();
    slots.clear();
    for (std::int64_t s = 0; s < num_seqs; ++s) {
      const std::span<const BlockId> table(tables.data() + s * per_seq, static_cast<std::size_t>(per_seq));
      seqs.push_back({static_cast<std::int32_t>(s * num_query), static_cast<std::int32_t>(num_query),
                      static_cast<std::int32_t>(len), table});
      for (std::int64_t p = context; p < len; ++p) slots.push_back(table[static_cast<std::size_t>(p / bs)] * bs + p % bs);
    }
  }

  void check_rows(const Op& op, std::int64_t rows_needed, std::int64_t have, const char* what) const {
    if (rows_needed > have) {
      throw Error("profiler: op '" + std::string(op_name(op.kind)) + "' needs " + std::to_string(rows_needed) + " " +
                  what + ", " + std::to_string(have) + " allocated");
    }
  }

  // A MoE's expert GEMMs and their silu * up, timed apart from the fused
  // moe_experts call that runs them in a step: step_ops spreads the op's m
  // rows evenly over num_seqs experts, one GEMM per expert on its rows.
  std::function<void(std::size_t)> expert_part(const Op& op) {
    if (op.kind == OpKind::silu_mul) {
      check_rows(op, op.tokens, scratch.act.rows, "token rows");  // tokens x top_k
      const TensorView gu = scratch.gate_up.slice_rows(0, op.tokens), a = scratch.act.slice_rows(0, op.tokens);
      return [this, gu, a](std::size_t) { backend->silu_and_mul(gu, a); };
    }
    const bool up = op.kind == OpKind::moe_gate_up_proj;
    const std::int64_t experts = op.num_seqs;
    if (experts < 1 || experts > static_cast<std::int64_t>(weights.layers[0].expert_gate_up.size())) {
      throw Error("profiler: op '" + std::string(op_name(op.kind)) + "' touches " + std::to_string(experts) +
                  " experts; the engine's model has " + std::to_string(weights.layers[0].expert_gate_up.size()));
    }
    const std::int64_t per = (op.m + experts - 1) / experts;
    check_rows(op, per, up ? scratch.h.rows : scratch.act.rows, "rows per expert");
    std::vector<std::int64_t> split(static_cast<std::size_t>(experts), op.m / experts);
    for (std::int64_t e = 0; e < op.m % experts; ++e) ++split[static_cast<std::size_t>(e)];
    const TensorView a = up ? scratch.h : scratch.act, c = up ? scratch.gate_up : scratch.delta;
    return [this, up, split, a, c](std::size_t l) {
      const LayerWeights& L = weights.layers[l];
      for (std::size_t e = 0; e < split.size(); ++e) {
        if (split[e] == 0) continue;
        GemmOptions options;
        const std::vector<TensorView>& scales = up ? L.expert_gate_up_scales : L.expert_down_scales;
        if (!scales.empty()) options.w_scales = &scales[e];  // int8 experts
        backend->gemm(a.slice_rows(0, split[e]), up ? L.expert_gate_up[e] : L.expert_down[e],
                      c.slice_rows(0, split[e]), options);
      }
    };
  }

  // The work of one instance of `op` on layer `l`: the forward program's
  // call that runs it in a step (models/forward_program), on rows shaped as
  // step_ops shaped the op.
  std::function<void(std::size_t)> work(const Op& op) {
    const bool moe = config.is_moe();
    const int c = call_of(op.kind, moe);
    if (c < 0) {
      throw Error("profiler: op '" + std::string(op_name(op.kind)) + "' is not profiled (collectives need tp > 1)");
    }
    const ForwardCall call = static_cast<ForwardCall>(c);
    if (call == ForwardCall::moe_experts) return expert_part(op);
    args.tokens = 0;
    args.samples = 0;
    switch (call_info(call).rows) {
      case CallRows::tokens:
        args.tokens = op.tokens;
        // The final norm's gather and RMSNorm run on the step's sampling rows.
        args.samples = call == ForwardCall::final_norm ? op.num_seqs : 0;
        break;
      case CallRows::sampling:
        args.samples = call == ForwardCall::lm_head ? op.m : op.num_seqs;
        break;
      case CallRows::attention: {
        const bool prefill = op.kind == OpKind::attn_prefill;
        if (prefill && op.num_seqs != 1) throw Error("profiler: attn_prefill is timed one seq at a time");
        const std::int64_t n = prefill ? op.tokens : 1;
        const std::int64_t ctx = prefill ? op.context : op.context / std::max<std::int64_t>(op.num_seqs, 1);
        args.tokens = op.tokens;
        check_rows(op, op.tokens, options.max_tokens, "token rows");
        layout_attention(op.num_seqs, n, ctx);
        args.slots = slots;
        args.attention_seqs = seqs;
        args.kv = std::span<const KvCacheView>(&cache, 1);
        break;
      }
    }
    check_rows(op, args.tokens, options.max_tokens, "token rows");
    check_rows(op, args.samples, options.max_seqs, "sampling rows");
    if (op.n > 0 && (op.kind == OpKind::qkv_proj || op.kind == OpKind::o_proj || op.kind == OpKind::gate_up_proj ||
                     op.kind == OpKind::down_proj || op.kind == OpKind::moe_router || op.kind == OpKind::lm_head)) {
      const LayerWeights& L = weights.layers[0];
      const TensorView& w0 = op.kind == OpKind::qkv_proj    ? L.qkv
                             : op.kind == OpKind::o_proj    ? L.o
                             : op.kind == OpKind::gate_up_proj ? L.gate_up
                             : op.kind == OpKind::down_proj ? L.down
                             : op.kind == OpKind::moe_router ? L.router
                                                             : weights.lm_head;
      if (w0.rows < op.n || w0.cols != op.k) {
        throw Error("profiler: op '" + std::string(op_name(op.kind)) + "' is " + std::to_string(op.n) + " x " +
                    std::to_string(op.k) + " in step_ops but the engine's weight is " + std::to_string(w0.rows) +
                    " x " + std::to_string(w0.cols));
      }
    }
    return [this, call](std::size_t l) { run_call(call, args, l); };
  }
};

OpBench::OpBench(const ModelConfig& config, const OpBenchOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  check_model_config(config);
  if (options.max_tokens < 1 || options.max_seqs < 1) throw UsageError("profiler: max tokens and seqs must be >= 1");
  m.config = config;
  m.options = options;
  BackendOptions bo;
  bo.threads = options.engine.threads;
  m.backend = make_backend(options.engine.backend, bo);
  WeightOptions w;
  w.dir = options.engine.weights_dir;
  w.seed = options.engine.seed;
  w.dtype = options.engine.weight_dtype;
  w.quantization = options.engine.quantization;  // the GEMMs timed are the ones the engine runs
  m.weights = load_model_weights(*m.backend, config, w);
  m.kv_dtype = resolve_kv_cache_dtype(options.engine.kv_cache_dtype, std::string(elem_type_name(m.weights.embed.dtype)));
  m.carve();
  ForwardArgs& a = m.args;
  a.backend = m.backend.get();
  a.config = &m.config;
  a.weights = &m.weights;
  a.scratch = &m.scratch;
  a.ids = m.ids;
  a.positions = m.positions;
  a.sample_rows = m.rows;
  a.sampling = m.sampling;
  a.sampled = m.sampled;
  a.attention.num_heads = static_cast<std::int32_t>(config.num_heads);
  a.attention.num_kv_heads = static_cast<std::int32_t>(config.num_kv_heads);
  a.attention.head_dim = static_cast<std::int32_t>(config.head_dim);
  a.attention.sliding_window = static_cast<std::int32_t>(std::min<std::int64_t>(config.sliding_window, INT32_MAX));
  a.rope = rope_config(config);
  a.eps = static_cast<float>(config.rms_norm_eps);
  m.backend->synchronize();
}

OpBench::~OpBench() = default;

TimingStats OpBench::time(const Op& op, const TimingPolicy& policy) {
  Impl& m = *impl_;
  const std::function<void(std::size_t)> one = m.work(op);
  const std::size_t layers = m.weights.layers.size();
  // One untimed call decides whether a run cycles over the layers.
  const auto t0 = std::chrono::steady_clock::now();
  one(0);
  m.backend->synchronize();
  const double first =
      static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  // Ops outside the layers (embed, lm_head, sample) just repeat.
  const std::size_t cycle = first < kCycleBelowNs ? std::max<std::size_t>(layers, 1) : 1;
  return time_work(
      [&] {
        for (std::size_t l = 0; l < cycle; ++l) one(l % std::max<std::size_t>(layers, 1));
        m.backend->synchronize();
      },
      static_cast<std::int32_t>(cycle), policy);
}

DeviceInfo OpBench::device_info() const { return impl_->backend->device_info(); }
std::string OpBench::backend_name() const { return impl_->backend->name(); }
std::string OpBench::weight_dtype_name() const { return std::string(elem_type_name(impl_->weights.embed.dtype)); }
std::string OpBench::kv_dtype_name() const { return impl_->kv_dtype; }

}  // namespace twin
