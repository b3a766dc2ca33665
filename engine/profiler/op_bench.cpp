#include "engine/profiler/op_bench.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/core/error.hpp"
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
  Buffer scratch;
  TensorView x, h, delta, qkv, attn, gate_up, act, xs, hs, logits, router_logits;
  Buffer kv;
  KvCacheView cache;
  std::string kv_dtype;  // resolved: f32 or bf16
  std::vector<TokenId> ids, sampled;
  std::vector<std::int32_t> positions, rows;
  std::vector<std::int64_t> slots;
  std::vector<BlockId> tables;
  std::vector<SeqAttention> seqs;
  std::vector<SamplingParams> sampling;
  AttentionShape shape;
  RopeConfig rope;

  void carve() {
    const std::int64_t T = options.max_tokens, S = options.max_seqs, H = config.hidden_size;
    const std::int64_t I = config.intermediate_size;
    // MoE: every token is routed to top_k experts, so the expert MLP's rows
    // (gate_up, act) number tokens x top_k.
    const std::int64_t R = T * std::max<std::int64_t>(config.experts_per_token, 1);
    struct Want {
      TensorView* view;
      std::int64_t rows, cols;
    };
    const std::vector<Want> wants = {{&x, T, H},          {&h, T, H},           {&delta, T, H},
                                     {&qkv, T, config.q_dim() + 2 * config.kv_dim()},
                                     {&attn, T, config.q_dim()}, {&gate_up, R, 2 * I}, {&act, R, I},
                                     {&xs, S, H},         {&hs, S, H},          {&logits, S, config.vocab_size},
                                     {&router_logits, T, std::max<std::int64_t>(config.num_experts, 1)}};
    std::vector<std::size_t> offsets;
    std::size_t total = 0;
    for (const Want& w : wants) {
      total = (total + 63) / 64 * 64;
      offsets.push_back(total);
      total += static_cast<std::size_t>(w.rows * w.cols) * sizeof(float);
    }
    scratch = backend->allocate(total);
    for (std::size_t i = 0; i < wants.size(); ++i) {
      *wants[i].view = scratch.view(ElemType::f32, wants[i].rows, wants[i].cols, offsets[i]);
      // Small finite values: no NaN or denormal slow paths in the timed kernels.
      backend->fill(*wants[i].view, 0.01f);
    }
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
    cache.dtype = kv_dtype == "bf16" ? ElemType::bf16 : ElemType::f32;
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

  const TensorView& layer_weight(OpKind kind, std::size_t layer) const {
    const LayerWeights& L = weights.layers[layer];
    switch (kind) {
      case OpKind::qkv_proj: return L.qkv;
      case OpKind::o_proj: return L.o;
      case OpKind::moe_router: return L.router;
      case OpKind::gate_up_proj: return L.gate_up;
      case OpKind::down_proj: return L.down;
      default: return weights.lm_head;
    }
  }

  void check_rows(const Op& op, std::int64_t rows_needed, std::int64_t have, const char* what) const {
    if (rows_needed > have) {
      throw Error("profiler: op '" + std::string(op_name(op.kind)) + "' needs " + std::to_string(rows_needed) + " " +
                  what + ", " + std::to_string(have) + " allocated");
    }
  }

  // The work of one instance on layer `l`.
  std::function<void(std::size_t)> work(const Op& op) {
    const float eps = static_cast<float>(config.rms_norm_eps);
    const std::int64_t qd = config.q_dim(), kvd = config.kv_dim();
    switch (op.kind) {
      case OpKind::qkv_proj:
      case OpKind::o_proj:
      case OpKind::gate_up_proj:
      case OpKind::down_proj:
      case OpKind::moe_router:
      case OpKind::lm_head: {
        const bool head = op.kind == OpKind::lm_head;
        check_rows(op, op.m, head ? options.max_seqs : options.max_tokens, head ? "sampling rows" : "token rows");
        const TensorView& w0 = layer_weight(op.kind, 0);
        if (w0.rows < op.n || w0.cols != op.k) {
          throw Error("profiler: op '" + std::string(op_name(op.kind)) + "' is " + std::to_string(op.n) + " x " +
                      std::to_string(op.k) + " in step_ops but the engine's weight is " + std::to_string(w0.rows) +
                      " x " + std::to_string(w0.cols));
        }
        TensorView a, c;
        switch (op.kind) {
          case OpKind::qkv_proj: a = h; c = qkv; break;
          case OpKind::o_proj: a = attn; c = delta; break;
          case OpKind::gate_up_proj: a = h; c = gate_up; break;
          case OpKind::down_proj: a = act; c = delta; break;
          case OpKind::moe_router: a = h; c = router_logits; break;
          default: a = hs; c = logits; break;
        }
        a = a.slice_rows(0, op.m);
        c = c.slice_rows(0, op.m);
        return [this, kind = op.kind, a, c](std::size_t l) {
          const LayerWeights& L = weights.layers[l];
          GemmOptions o;
          if (kind == OpKind::qkv_proj && L.qkv_bias.data) o.bias = &L.qkv_bias;
          backend->gemm(a, layer_weight(kind, l), c, o);
        };
      }
      case OpKind::moe_gate_up_proj:
      case OpKind::moe_down_proj: {
        // step_ops spreads the op's m rows evenly over num_seqs experts; the
        // engine runs one GEMM per expert on its rows (moe_experts).
        const bool up = op.kind == OpKind::moe_gate_up_proj;
        const std::int64_t experts = op.num_seqs;
        if (experts < 1 || experts > static_cast<std::int64_t>(weights.layers[0].expert_gate_up.size())) {
          throw Error("profiler: op '" + std::string(op_name(op.kind)) + "' touches " + std::to_string(experts) +
                      " experts; the engine's model has " +
                      std::to_string(weights.layers[0].expert_gate_up.size()));
        }
        const std::int64_t per = (op.m + experts - 1) / experts;
        check_rows(op, per, up ? h.rows : act.rows, "rows per expert");
        std::vector<std::int64_t> rows(static_cast<std::size_t>(experts), op.m / experts);
        for (std::int64_t e = 0; e < op.m % experts; ++e) ++rows[static_cast<std::size_t>(e)];
        const TensorView a = up ? h : act, c = up ? gate_up : delta;
        return [this, up, rows, a, c](std::size_t l) {
          const LayerWeights& L = weights.layers[l];
          for (std::size_t e = 0; e < rows.size(); ++e) {
            if (rows[e] == 0) continue;
            backend->gemm(a.slice_rows(0, rows[e]), up ? L.expert_gate_up[e] : L.expert_down[e],
                          c.slice_rows(0, rows[e]), GemmOptions{});
          }
        };
      }
      case OpKind::embed: {
        check_rows(op, op.tokens, options.max_tokens, "token rows");
        const std::span<const TokenId> t(ids.data(), static_cast<std::size_t>(op.tokens));
        const TensorView out = x.slice_rows(0, op.tokens);
        return [this, t, out](std::size_t) { backend->embedding(t, weights.embed, out); };
      }
      case OpKind::rmsnorm: {
        check_rows(op, op.tokens, options.max_tokens, "token rows");
        const TensorView r = x.slice_rows(0, op.tokens), d = delta.slice_rows(0, op.tokens), o = h.slice_rows(0, op.tokens);
        return [this, r, d, o, eps](std::size_t l) { backend->add_rmsnorm(r, d, weights.layers[l].input_norm, eps, o); };
      }
      case OpKind::rotary: {
        check_rows(op, op.tokens, options.max_tokens, "token rows");
        const TensorView all = qkv.slice_rows(0, op.tokens);
        const TensorView q = all.slice_cols(0, qd), k = all.slice_cols(qd, kvd);
        const std::span<const std::int32_t> pos(positions.data(), static_cast<std::size_t>(op.tokens));
        return [this, q, k, pos](std::size_t) { backend->rotary(q, k, pos, rope); };
      }
      case OpKind::silu_mul: {
        check_rows(op, op.tokens, act.rows, "token rows");  // MoE: tokens x top_k
        const TensorView gu = gate_up.slice_rows(0, op.tokens), a = act.slice_rows(0, op.tokens);
        return [this, gu, a](std::size_t) { backend->silu_and_mul(gu, a); };
      }
      case OpKind::final_norm: {
        check_rows(op, op.tokens, options.max_tokens, "token rows");
        const TensorView r = x.slice_rows(0, op.tokens), d = delta.slice_rows(0, op.tokens);
        return [this, r, d](std::size_t) { backend->add(r, d); };
      }
      case OpKind::sample: {
        const std::int64_t s = op.tokens;
        check_rows(op, s, options.max_seqs, "sampling rows");
        const std::span<const std::int32_t> r(rows.data(), static_cast<std::size_t>(s));
        const TensorView in = x, gathered = xs.slice_rows(0, s), normed = hs.slice_rows(0, s);
        const TensorView lg = logits.slice_rows(0, s);
        const std::span<const SamplingParams> params(sampling.data(), static_cast<std::size_t>(s));
        const std::span<TokenId> out(sampled.data(), static_cast<std::size_t>(s));
        return [this, r, in, gathered, normed, lg, params, out, eps](std::size_t) {
          backend->gather_rows(in, r, gathered);
          backend->rmsnorm(gathered, weights.final_norm, eps, normed);
          backend->sample(lg, params, out);
        };
      }
      case OpKind::attn_prefill:
      case OpKind::attn_decode: {
        const bool prefill = op.kind == OpKind::attn_prefill;
        if (prefill && op.num_seqs != 1) throw Error("profiler: attn_prefill is timed one seq at a time");
        const std::int64_t n = prefill ? op.tokens : 1;
        const std::int64_t c = prefill ? op.context : op.context / std::max<std::int64_t>(op.num_seqs, 1);
        check_rows(op, op.tokens, options.max_tokens, "token rows");
        layout_attention(op.num_seqs, n, c);
        const TensorView all = qkv.slice_rows(0, op.tokens);
        const TensorView q = all.slice_cols(0, qd), k = all.slice_cols(qd, kvd), v = all.slice_cols(qd + kvd, kvd);
        const TensorView out = attn.slice_rows(0, op.tokens);
        return [this, q, k, v, out](std::size_t) {
          backend->kv_write(k, v, cache, slots);
          backend->paged_attention(q, cache, seqs, shape, out);
        };
      }
      default:
        throw Error("profiler: op '" + std::string(op_name(op.kind)) +
                    "' is not profiled (collectives need tp > 1)");
    }
  }
};

OpBench::OpBench(const ModelConfig& config, const OpBenchOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  check_model_config(config);
  if (options.max_tokens < 1 || options.max_seqs < 1) throw UsageError("profiler: max tokens and seqs must be >= 1");
  m.config = config;
  m.options = options;
  BackendOptions bo;
  bo.threads = options.threads;
  m.backend = make_backend(options.backend, bo);
  WeightOptions w;
  w.dir = options.weights_dir;
  w.seed = options.seed;
  w.dtype = options.weight_dtype;
  m.weights = load_model_weights(*m.backend, config, w);
  m.kv_dtype = resolve_kv_cache_dtype(options.kv_cache_dtype, std::string(elem_type_name(m.weights.embed.dtype)));
  m.carve();
  m.shape.num_heads = static_cast<std::int32_t>(config.num_heads);
  m.shape.num_kv_heads = static_cast<std::int32_t>(config.num_kv_heads);
  m.shape.head_dim = static_cast<std::int32_t>(config.head_dim);
  m.shape.sliding_window = static_cast<std::int32_t>(std::min<std::int64_t>(config.sliding_window, INT32_MAX));
  m.rope = rope_config(config);
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
