// CUDA backend speed on the device it finds (prints "no CUDA device:
// skipped" where there is none): bf16 GEMM TFLOP/s at 4096 tokens for
// Llama-3.1-8B's projections against the dense bf16 peak, and fp8 W8A8
// against the fp8 peak; decode step time
// at batch 1 for Llama-3.1-8B with random bf16 weights against the
// weights / HBM-bandwidth roofline; paged attention decode bandwidth (f32,
// bf16 and fp8 KV) and prefill TFLOP/s; add_rmsnorm and greedy argmax times.
// Peaks come from a hardware profile (argument 1, default
// hwprofiles/profiles/h200.json); argument 2, one of gemm, fp8, decode,
// attention, small, prefill, runs that section alone (under a profiler,
// `ncu --kernel-name regex:attention_decode bench_cuda P attention`).
// Prints figures; asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "engine/backend/backend.hpp"
#include "tools/bench/best_time.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace twin;

// Trials of ~50 ms: a GPU call is short and its launch overhead jitters.
double seconds_per_call(const std::function<void()>& fn) {
  return twin::bench::best_seconds_per_call(fn, 0.05, 1 << 16);
}

// Random bf16 values without a per-element host loop over the whole model:
// one 64 Mi-element random block is uploaded once and copied device to
// device into every weight.
class RandomFill {
 public:
  explicit RandomFill(Backend& be) : be_(be) {
    std::vector<std::uint16_t> host(kElems);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-0.02f, 0.02f);
    for (auto& h : host) h = f32_to_bf16(dist(rng));
    seed_ = be.allocate(kElems * 2);
    be.upload(seed_.data(), host.data(), kElems * 2);
  }
  void fill(void* dst, std::int64_t elems) {
    for (std::int64_t off = 0; off < elems; off += kElems) {
      const std::int64_t n = std::min<std::int64_t>(kElems, elems - off);
      be_.copy(make_view(seed_.data(), ElemType::bf16, 1, n),
               make_view(static_cast<char*>(dst) + off * 2, ElemType::bf16, 1, n));
    }
  }

 private:
  static constexpr std::int64_t kElems = std::int64_t{64} << 20;
  Backend& be_;
  Buffer seed_;
};

struct Weight {
  Buffer buf;
  TensorView view;
};

Weight bf16_weight(Backend& be, RandomFill& rf, std::int64_t rows, std::int64_t cols) {
  Weight w{be.allocate(static_cast<std::size_t>(rows * cols) * 2), {}};
  w.view = w.buf.view(ElemType::bf16, rows, cols);
  rf.fill(w.view.data, rows * cols);
  return w;
}

// Llama-3.1-8B.
constexpr std::int64_t kHidden = 4096, kInter = 14336, kLayers = 32, kHeads = 32, kKvHeads = 8, kHeadDim = 128,
                       kVocab = 128256;

void bench_gemm(Backend& be, RandomFill& rf, double peak_tflops) {
  std::printf("\nbf16 GEMM at 4096 tokens (A f32 -> bf16 conversion included), Llama-3.1-8B shapes\n");
  std::printf("%-10s %7s %7s %9s %9s %8s\n", "gemm", "n", "k", "ms", "TFLOP/s", "of peak");
  const std::int64_t m = 4096;
  struct Shape {
    const char* name;
    std::int64_t n, k;
  };
  const Shape shapes[] = {{"qkv", (kHeads + 2 * kKvHeads) * kHeadDim, kHidden},
                          {"o", kHidden, kHeads * kHeadDim},
                          {"gate_up", 2 * kInter, kHidden},
                          {"down", kHidden, kInter},
                          {"lm_head", kVocab, kHidden}};
  double total_flops = 0, total_s = 0;
  for (const Shape& s : shapes) {
    Weight w = bf16_weight(be, rf, s.n, s.k);
    Buffer a = be.allocate(static_cast<std::size_t>(m * s.k) * 4), c = be.allocate(static_cast<std::size_t>(m * s.n) * 4);
    const TensorView av = a.view(ElemType::f32, m, s.k), cv = c.view(ElemType::f32, m, s.n);
    be.fill(av, 0.01f);
    const double sec = seconds_per_call([&] {
      be.gemm(av, w.view, cv);
      be.synchronize();
    });
    const double flops = 2.0 * m * s.n * s.k;
    if (std::string(s.name) != "lm_head") {
      total_flops += flops;
      total_s += sec;
    }
    std::printf("%-10s %7lld %7lld %9.3f %9.1f %7.1f%%\n", s.name, static_cast<long long>(s.n),
                static_cast<long long>(s.k), sec * 1e3, flops / sec / 1e12, 100.0 * flops / sec / 1e12 / peak_tflops);
  }
  std::printf("%-10s %7s %7s %9.3f %9.1f %7.1f%%   (one layer's GEMMs; peak %.1f TFLOP/s)\n", "layer", "", "",
              total_s * 1e3, total_flops / total_s / 1e12, 100.0 * total_flops / total_s / 1e12 / peak_tflops,
              peak_tflops);
}

// The same GEMMs with --quantization fp8 (W8A8, cuda_gemm_fp8.cpp): E4M3
// weights with per-channel scales; A (f32) scaled into E4M3 per row, the
// cuBLASLt product and the scales all timed. Against the fp8 dense peak.
void bench_gemm_fp8(Backend& be, double fp8_peak_tflops) {
  std::printf("\nfp8 W8A8 GEMM at 4096 tokens (A f32 -> E4M3 per row and the scales included), Llama-3.1-8B shapes\n");
  std::printf("%-10s %7s %7s %9s %9s %8s\n", "gemm", "n", "k", "ms", "TFLOP/s", "of peak");
  const std::int64_t m = 4096;
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> shapes[] = {
      {"qkv", {(kHeads + 2 * kKvHeads) * kHeadDim, kHidden}},
      {"o", {kHidden, kHeads * kHeadDim}},
      {"gate_up", {2 * kInter, kHidden}},
      {"down", {kHidden, kInter}}};
  double total_flops = 0, total_s = 0;
  for (const auto& [name, nk] : shapes) {
    const auto [n, k] = nk;
    std::vector<std::uint8_t> host(static_cast<std::size_t>(n * k));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::uint8_t>(0x20 + i % 24);  // finite E4M3
    Buffer w = be.allocate(host.size()), s = be.allocate(static_cast<std::size_t>(n) * 4);
    be.upload(w.data(), host.data(), host.size());
    const TensorView wv = w.view(ElemType::f8e4m3, n, k), sv = s.view(ElemType::f32, 1, n);
    be.fill(sv, 0.01f);
    Buffer a = be.allocate(static_cast<std::size_t>(m * k) * 4), c = be.allocate(static_cast<std::size_t>(m * n) * 4);
    const TensorView av = a.view(ElemType::f32, m, k), cv = c.view(ElemType::f32, m, n);
    be.fill(av, 0.01f);
    GemmOptions o;
    o.w_scales = &sv;
    const double sec = seconds_per_call([&] {
      be.gemm(av, wv, cv, o);
      be.synchronize();
    });
    const double flops = 2.0 * m * n * k;
    total_flops += flops;
    total_s += sec;
    std::printf("%-10s %7lld %7lld %9.3f %9.1f %7.1f%%\n", name, static_cast<long long>(n), static_cast<long long>(k),
                sec * 1e3, flops / sec / 1e12, 100.0 * flops / sec / 1e12 / fp8_peak_tflops);
  }
  std::printf("%-10s %7s %7s %9.3f %9.1f %7.1f%%   (one layer's GEMMs; fp8 peak %.1f TFLOP/s)\n", "layer", "", "",
              total_s * 1e3, total_flops / total_s / 1e12, 100.0 * total_flops / total_s / 1e12 / fp8_peak_tflops,
              fp8_peak_tflops);
}

// The Llama-3.1-8B bf16 weights one decode step reads.
struct DecodeModel {
  struct Layer {
    Weight qkv, o, gate_up, down, n1, n2;
  };
  std::vector<Layer> layers;
  Weight embed, head, final_norm;
  double weight_bytes = 0;

  DecodeModel(Backend& be, RandomFill& rf) {
    const std::int64_t qd = kHeads * kHeadDim, kvd = kKvHeads * kHeadDim;
    for (std::int64_t l = 0; l < kLayers; ++l) {
      layers.push_back({bf16_weight(be, rf, qd + 2 * kvd, kHidden), bf16_weight(be, rf, kHidden, qd),
                        bf16_weight(be, rf, 2 * kInter, kHidden), bf16_weight(be, rf, kHidden, kInter),
                        bf16_weight(be, rf, 1, kHidden), bf16_weight(be, rf, 1, kHidden)});
      weight_bytes +=
          2.0 * ((qd + 2 * kvd) * kHidden + kHidden * qd + 2 * kInter * kHidden + kHidden * kInter + 2 * kHidden);
    }
    embed = bf16_weight(be, rf, kVocab, kHidden);
    head = bf16_weight(be, rf, kVocab, kHidden);
    final_norm = bf16_weight(be, rf, 1, kHidden);
    weight_bytes += 2.0 * (2 * kVocab * kHidden + kHidden);  // the embedding row read is tiny, counted anyway
  }
};

// One decode step of `batch` sequences of `context` tokens each (bf16 KV
// cache), the engine's op sequence; against (weights + the KV read) / HBM.
// Over 80 lines for now: the step's ops in the engine's order on buffers of
// this frame; it runs only on a GPU, so it is split in a GPU session that
// can compare its figures before and after (issue 42).
void bench_decode(Backend& be, const DecodeModel& m, double hbm_gbps, std::int32_t batch, std::int32_t context,
                  double target) {
  const std::int64_t qd = kHeads * kHeadDim, kvd = kKvHeads * kHeadDim;
  const std::int32_t block = 16, per_seq = context / block + 1;
  KvCacheView cache;
  cache.dtype = ElemType::bf16;
  cache.num_blocks = static_cast<std::int64_t>(batch) * per_seq;
  cache.block_size = block;
  cache.kv_heads = static_cast<std::int32_t>(kKvHeads);
  cache.head_dim = static_cast<std::int32_t>(kHeadDim);
  std::vector<Buffer> kv;
  std::vector<KvCacheView> caches;
  for (std::int64_t l = 0; l < kLayers; ++l) {
    kv.push_back(be.allocate(static_cast<std::size_t>(cache.bytes_per_tensor())));
    kv.push_back(be.allocate(static_cast<std::size_t>(cache.bytes_per_tensor())));
    KvCacheView c = cache;
    c.k = kv[kv.size() - 2].data();
    c.v = kv.back().data();
    // Zero bits are 0.0 in bf16 too: fill the tensors as f32 words.
    const std::int64_t words = cache.bytes_per_tensor() / 4;
    be.fill(make_view(c.k, ElemType::f32, 1, words), 0.0f);
    be.fill(make_view(c.v, ElemType::f32, 1, words), 0.0f);
    caches.push_back(c);
  }
  const std::int64_t B = batch;
  Buffer act = be.allocate(static_cast<std::size_t>(B * (3 * kHidden + (qd + 2 * kvd) + qd + 2 * kInter + kInter + kVocab)) * 4 +
                           8 * 64);
  std::size_t off = 0;
  auto carve = [&](std::int64_t cols) {
    const TensorView v = act.view(ElemType::f32, B, cols, off);
    off += (static_cast<std::size_t>(B * cols) * 4 + 63) / 64 * 64;
    return v;
  };
  const TensorView x = carve(kHidden), h = carve(kHidden), delta = carve(kHidden), qkv = carve(qd + 2 * kvd),
                   attn = carve(qd), gu = carve(2 * kInter), a2 = carve(kInter), logits = carve(kVocab);
  const TensorView q = qkv.slice_cols(0, qd), k = qkv.slice_cols(qd, kvd), v = qkv.slice_cols(qd + kvd, kvd);
  std::vector<std::vector<BlockId>> tables(static_cast<std::size_t>(batch));
  std::vector<SeqAttention> seqs;
  std::vector<std::int32_t> positions;
  std::vector<std::int64_t> slots;
  for (std::int32_t s = 0; s < batch; ++s) {
    auto& t = tables[static_cast<std::size_t>(s)];
    for (std::int32_t i = 0; i < per_seq; ++i) t.push_back(s * per_seq + i);
    seqs.push_back({s, 1, context, t});
    positions.push_back(context - 1);
    slots.push_back(static_cast<std::int64_t>(t[static_cast<std::size_t>((context - 1) / block)]) * block +
                    (context - 1) % block);
  }
  const std::vector<TokenId> tokens(static_cast<std::size_t>(batch), 42);
  AttentionShape shape;
  shape.num_heads = static_cast<std::int32_t>(kHeads);
  shape.num_kv_heads = static_cast<std::int32_t>(kKvHeads);
  shape.head_dim = static_cast<std::int32_t>(kHeadDim);
  RopeConfig rope;
  rope.head_dim = static_cast<std::int32_t>(kHeadDim);
  rope.theta = 500000.0f;
  std::vector<SamplingParams> params(static_cast<std::size_t>(batch));
  std::vector<TokenId> sampled(static_cast<std::size_t>(batch));
  auto forward = [&] {
    be.embedding(tokens, m.embed.view, x);
    for (std::int64_t l = 0; l < kLayers; ++l) {
      const DecodeModel::Layer& L = m.layers[static_cast<std::size_t>(l)];
      if (l == 0) {
        be.rmsnorm(x, L.n1.view, 1e-5f, h);
      } else {
        be.add_rmsnorm(x, delta, L.n1.view, 1e-5f, h);
      }
      be.gemm(h, L.qkv.view, qkv);
      be.rotary(q, k, positions, rope);
      be.kv_write(k, v, caches[static_cast<std::size_t>(l)], slots);
      be.paged_attention(q, caches[static_cast<std::size_t>(l)], seqs, shape, attn);
      be.gemm(attn, L.o.view, delta);
      be.add_rmsnorm(x, delta, L.n2.view, 1e-5f, h);
      be.gemm(h, L.gate_up.view, gu);
      be.silu_and_mul(gu, a2);
      be.gemm(a2, L.down.view, delta);
    }
    be.add(x, delta);
    be.rmsnorm(x, m.final_norm.view, 1e-5f, h);
    be.gemm(h, m.head.view, logits);
  };
  const double sec = seconds_per_call([&] {
    forward();
    be.sample(logits, params, sampled);  // waits for the step
  });
  // The same step through a CUDA graph (docs/cuda.md, "Step graphs"): its
  // ops warmed and recorded once, then each step a replay and the sampling.
  double graph_sec = 0;
  if (be.supports_step_graphs()) {
    const StepGraphKey key{&m, batch, std::max(1024, context)};
    be.begin_step_graph(key, StepGraphPass::warm);
    forward();
    be.end_step_graph();
    be.begin_step_graph(key, StepGraphPass::record);
    forward();
    be.end_step_graph();
    graph_sec = seconds_per_call([&] {
      be.begin_step_graph(key, StepGraphPass::replay);
      forward();
      be.end_step_graph();
      be.sample(logits, params, sampled);
    });
    be.clear_step_graphs(&m);
  }
  const double kv_bytes = 2.0 * kLayers * static_cast<double>(batch) * context * kvd * 2;  // K and V, bf16
  const double roofline = (m.weight_bytes + kv_bytes) / (hbm_gbps * 1e9);
  std::printf("\nLlama-3.1-8B bf16 decode, batch %d, context %d (bf16 KV cache)\n", batch, context);
  std::printf("%-28s %9.3f ms\n", "decode step", sec * 1e3);
  std::printf("%-28s %9.3f ms  (%.2f GB of weights + %.2f GB of KV at %.0f GB/s)\n", "bytes / HBM bandwidth",
              roofline * 1e3, m.weight_bytes / 1e9, kv_bytes / 1e9, hbm_gbps);
  std::printf("%-28s %9.2fx  (target <= %.2fx)\n", "step / roofline", sec / roofline, target);
  if (graph_sec > 0) {
    std::printf("%-28s %9.3f ms\n", "decode step, CUDA graph", graph_sec * 1e3);
    std::printf("%-28s %9.2fx  (target <= %.2fx; %.2fx faster than eager)\n", "graph step / roofline",
                graph_sec / roofline, target, sec / graph_sec);
  }
}

// A paged KV cache of `seqs_n` sequences of `context` tokens each, in
// consecutive blocks, with `num_query` new tokens per sequence and their
// q/out rows: Llama-3.1-8B's attention shape.
struct PagedAttentionCase {
  PagedAttentionCase(Backend& be, ElemType dt, std::int32_t seqs_n, std::int32_t num_query, std::int32_t context) {
    const std::int32_t block = 16, per_seq = (context + block - 1) / block;
    cache.dtype = dt;
    cache.num_blocks = static_cast<std::int64_t>(seqs_n) * per_seq;
    cache.block_size = block;
    cache.kv_heads = static_cast<std::int32_t>(kKvHeads);
    cache.head_dim = static_cast<std::int32_t>(kHeadDim);
    kb = be.allocate(static_cast<std::size_t>(cache.bytes_per_tensor()));
    vb = be.allocate(static_cast<std::size_t>(cache.bytes_per_tensor()));
    cache.k = kb.data();
    cache.v = vb.data();
    tables.resize(static_cast<std::size_t>(seqs_n));
    for (std::int32_t s = 0; s < seqs_n; ++s) {
      for (std::int32_t b = 0; b < per_seq; ++b) tables[static_cast<std::size_t>(s)].push_back(s * per_seq + b);
      seqs.push_back({s * num_query, num_query, context, tables[static_cast<std::size_t>(s)]});
    }
    const std::int64_t rows = static_cast<std::int64_t>(seqs_n) * num_query, width = kHeads * kHeadDim;
    qo = be.allocate(static_cast<std::size_t>(2 * rows * width) * 4);
    q = qo.view(ElemType::f32, rows, width);
    out = qo.view(ElemType::f32, rows, width, static_cast<std::size_t>(rows * width) * 4);
    be.fill(q, 0.01f);
    shape.num_heads = static_cast<std::int32_t>(kHeads);
    shape.num_kv_heads = static_cast<std::int32_t>(kKvHeads);
    shape.head_dim = static_cast<std::int32_t>(kHeadDim);
  }
  double seconds(Backend& be) {
    return seconds_per_call([&] {
      be.paged_attention(q, cache, seqs, shape, out);
      be.synchronize();
    });
  }

  KvCacheView cache;
  Buffer kb, vb, qo;
  std::vector<std::vector<BlockId>> tables;
  std::vector<SeqAttention> seqs;
  TensorView q, out;
  AttentionShape shape;
};

// The GQA decode kernel (cuda_attention_decode.cu). Bytes: the whole K and
// V cache of the batch, each read once. Target: 3.0 TB/s at 32 x 4096 bf16
// (cuDNN SDPA measured 4.2 TB/s there on an H200, FlashAttention-2 2.6).
void bench_attention(Backend& be, double hbm_gbps) {
  std::printf("\npaged attention decode, Llama-3.1-8B heads (32 q, 8 kv, dim 128), block 16\n");
  std::printf("%-6s %6s %8s %9s %9s %8s\n", "cache", "seqs", "context", "ms", "GB/s", "of HBM");
  for (ElemType dt : {ElemType::f32, ElemType::bf16, ElemType::f8e4m3}) {  // fp8: --kv-cache-dtype fp8
    for (auto [seqs_n, context] : {std::pair{32, 4096}, std::pair{1, 32768}, std::pair{256, 1024}}) {
      PagedAttentionCase c(be, dt, seqs_n, 1, context);
      const double sec = c.seconds(be);
      const double bytes = 2.0 * static_cast<double>(c.cache.bytes_per_tensor());
      const bool target = dt == ElemType::bf16 && seqs_n == 32;
      std::printf("%-6s %6d %8d %9.3f %9.1f %7.1f%%%s\n", std::string(elem_type_name(dt)).c_str(), seqs_n, context,
                  sec * 1e3, bytes / sec / 1e9, 100.0 * bytes / sec / 1e9 / hbm_gbps,
                  target ? "  (target >= 3000 GB/s)" : "");
    }
  }
}

// Small kernels at Llama-3.1-8B's widths: add_rmsnorm over 4096 columns at
// 1 and 8192 rows (bytes: x and delta read, x and out written, bf16
// weight), and the greedy argmax over Llama 3's 128,256 vocabulary at batch
// 1 and 256. Before the rework the H200 measured 15 us for one rmsnorm row
// and 197 us for one argmax row.
void bench_small_kernels(Backend& be, RandomFill& rf, double hbm_gbps) {
  std::printf("\nsmall kernels, Llama-3.1-8B widths\n");
  std::printf("%-14s %6s %9s %9s %8s\n", "kernel", "rows", "us", "GB/s", "of HBM");
  const Weight w = bf16_weight(be, rf, 1, kHidden);
  for (std::int64_t rows : {std::int64_t{1}, std::int64_t{8192}}) {
    Buffer buf = be.allocate(static_cast<std::size_t>(3 * rows * kHidden) * 4);
    const TensorView x = buf.view(ElemType::f32, rows, kHidden), d = buf.view(ElemType::f32, rows, kHidden, static_cast<std::size_t>(rows * kHidden) * 4),
                     o = buf.view(ElemType::f32, rows, kHidden, static_cast<std::size_t>(2 * rows * kHidden) * 4);
    be.fill(x, 0.01f);
    be.fill(d, 0.0f);
    const double sec = seconds_per_call([&] {
      be.add_rmsnorm(x, d, w.view, 1e-5f, o);
      be.synchronize();
    });
    const double bytes = 16.0 * static_cast<double>(rows * kHidden) + 2.0 * kHidden;
    std::printf("%-14s %6lld %9.2f %9.1f %7.1f%%%s\n", "add_rmsnorm", static_cast<long long>(rows), sec * 1e6,
                bytes / sec / 1e9, 100.0 * bytes / sec / 1e9 / hbm_gbps, rows == 1 ? "  (was 15 us on the H200)" : "");
  }
  for (std::int64_t rows : {std::int64_t{1}, std::int64_t{256}}) {
    Buffer buf = be.allocate(static_cast<std::size_t>(rows * kVocab) * 4);
    const TensorView logits = buf.view(ElemType::f32, rows, kVocab);
    be.fill(logits, 0.5f);  // all tied: the lowest id, every chunk scanned
    std::vector<SamplingParams> params(static_cast<std::size_t>(rows));
    std::vector<TokenId> tokens(static_cast<std::size_t>(rows));
    const double sec = seconds_per_call([&] { be.sample(logits, params, tokens); });  // includes the token download
    const double bytes = 4.0 * static_cast<double>(rows * kVocab);
    std::printf("%-14s %6lld %9.2f %9.1f %7.1f%%%s\n", "argmax 128256", static_cast<long long>(rows), sec * 1e6,
                bytes / sec / 1e9, 100.0 * bytes / sec / 1e9 / hbm_gbps,
                rows == 1 ? "  (sample(): kernels + 4-byte download; was 197 us of kernel)" : "");
  }
}

// Prefill attention: the tensor-core kernel (bf16 mma, the default) beside
// the f32 tiled kernel (TWIN_CUDA_ATTENTION=reference, a second backend made
// with it set). FLOPs are 2 x (Q.K + P.V) x head_dim per visible (query,
// key) pair and query head; target for the tensor-core kernel: 300 TFLOP/s
// at 2048 x 2048 causal (cuDNN's SDPA does 407 on an H200, FlashAttention-2 207).
void bench_prefill_attention(Backend& be) {
  constexpr double kTargetTflops = 300.0;
  setenv("TWIN_CUDA_ATTENTION", "reference", 1);
  std::unique_ptr<Backend> ref = make_backend("cuda");
  unsetenv("TWIN_CUDA_ATTENTION");
  std::printf("\npaged attention prefill, Llama-3.1-8B heads (32 q, 8 kv, dim 128), block 16, causal\n");
  std::printf("%-6s %6s %8s %11s %13s %11s %13s %8s\n", "cache", "new", "context", "mma ms", "mma TFLOP/s",
              "tiled ms", "tiled TFLOP/s", "target");
  for (ElemType dt : {ElemType::f32, ElemType::bf16}) {
    for (auto [num_query, context] : {std::pair{2048, 2048}, std::pair{512, 8192}}) {
      double pairs = 0;
      for (std::int32_t i = 0; i < num_query; ++i) pairs += context - num_query + i + 1;
      const double flops = 4.0 * static_cast<double>(kHeadDim) * static_cast<double>(kHeads) * pairs;
      double sec = 0, sec_ref = 0;
      {
        PagedAttentionCase c(be, dt, 1, num_query, context);
        sec = c.seconds(be);
      }
      {
        PagedAttentionCase c(*ref, dt, 1, num_query, context);
        sec_ref = c.seconds(*ref);
      }
      std::printf("%-6s %6d %8d %11.3f %13.1f %11.3f %13.1f %8.0f\n", std::string(elem_type_name(dt)).c_str(),
                  num_query, context, sec * 1e3, flops / sec / 1e12, sec_ref * 1e3, flops / sec_ref / 1e12,
                  kTargetTflops);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<Backend> be;
  try {
    be = make_backend("cuda");
  } catch (const std::exception& e) {
    std::printf("bench_cuda: no CUDA device: skipped (%s)\n", e.what());
    return 0;
  }
  const std::string profile = argc > 1 ? argv[1] : "hwprofiles/profiles/h200.json";
  const std::string only = argc > 2 ? argv[2] : "";
  static constexpr const char* kSections[] = {"gemm", "fp8", "decode", "attention", "small", "prefill"};
  if (!only.empty() && std::find(std::begin(kSections), std::end(kSections), only) == std::end(kSections)) {
    std::printf("bench_cuda: unknown section '%s' (gemm, fp8, decode, attention, small, prefill)\n", only.c_str());
    return 2;
  }
  const auto wants = [&](const char* section) { return only.empty() || only == section; };
  double peak = 989.4, hbm = 4800, fp8_peak = 1978.9;
  std::ifstream in(profile);
  if (in) {
    const auto j = nlohmann::json::parse(in);
    peak = j.at("peak_tflops").at("bf16").get<double>();
    fp8_peak = j.at("peak_tflops").value("fp8", 0.0);
    hbm = j.at("memory_bandwidth_gbps").get<double>();
  } else {
    std::printf("(no profile at %s: using H200 figures)\n", profile.c_str());
  }
  const DeviceInfo info = be->device_info();
  std::printf("bench_cuda on %s, %.1f GiB; peaks from %s: bf16 %.1f TFLOP/s, HBM %.0f GB/s\n", info.name.c_str(),
              static_cast<double>(info.total_bytes) / (1 << 30), profile.c_str(), peak, hbm);
  try {
    RandomFill rf(*be);
    if (wants("gemm")) bench_gemm(*be, rf, peak);
    if (fp8_peak > 0 && wants("fp8")) {
      try {
        bench_gemm_fp8(*be, fp8_peak);
      } catch (const Error& e) {  // no fp8 tensor cores (an A100): said, and the rest still runs
        std::printf("fp8 GEMMs skipped: %s\n", e.what());
      }
    }
    if (wants("decode")) {
      const DecodeModel model(*be, rf);
      bench_decode(*be, model, hbm, 1, 512, 1.2);
      bench_decode(*be, model, hbm, 64, 2048, 1.3);
    }
    if (wants("attention")) bench_attention(*be, hbm);
    if (wants("small")) bench_small_kernels(*be, rf, hbm);
    if (wants("prefill")) bench_prefill_attention(*be);
  } catch (const std::exception& e) {
    std::printf("bench_cuda: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
