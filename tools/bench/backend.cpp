// CPU backend speed: GEMM GFLOP/s through the backend (f32 and bf16 weights)
// against raw cblas_sgemm (OpenBLAS's own threads) for the `small` model's
// projections; a streaming read bandwidth; paged attention decode bandwidth.
// Prints figures; asserts nothing.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tools/bench/best_time.hpp"
#include "engine/backend/cpu/cpu_backend.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Trials of ~20 ms.
double seconds_per_call(const std::function<void()>& fn) {
  return twin::bench::best_seconds_per_call(fn, 0.02, 1 << 20);
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Shape {
  const char* name;
  std::int64_t n, k;
};

volatile float sink = 0.0f;

// The `small` model's projections through the backend (f32 and bf16
// weights) against raw cblas_sgemm with OpenBLAS's own threads.
void bench_gemm(twin::Backend& be, int threads) {
  using namespace twin;
  // `small`: hidden 768, 12 heads / 4 kv heads of 64, intermediate 2048, vocab 32000.
  const Shape shapes[] = {{"qkv", 1280, 768}, {"o", 768, 768}, {"gate_up", 4096, 768},
                          {"down", 768, 2048}, {"lm_head", 32000, 768}};
  std::printf("GEMM C[m,n] = A[m,k] W[n,k]^T, GFLOP/s\n");
  std::printf("%-8s %5s %6s %5s %10s %10s %10s %8s\n", "op", "m", "n", "k", "raw_sgemm", "be_f32", "be_bf16",
              "f32/raw");
  for (std::int64_t m : {1, 2, 8, 32, 512}) {
    double raw_total = 0, f32_total = 0, bf16_total = 0, flops_total = 0;
    for (const Shape& s : shapes) {
      const auto a = random_floats(static_cast<std::size_t>(m * s.k), 1);
      const auto w = random_floats(static_cast<std::size_t>(s.n * s.k), 2);
      std::vector<std::uint16_t> wb(w.size());
      for (std::size_t i = 0; i < w.size(); ++i) wb[i] = f32_to_bf16(w[i]);
      std::vector<float> c(static_cast<std::size_t>(m * s.n));
      const double flops = 2.0 * static_cast<double>(m * s.n * s.k);

      openblas_set_num_threads(threads);
      const double raw = seconds_per_call([&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(s.n),
                    static_cast<blasint>(s.k), 1.0f, a.data(), static_cast<blasint>(s.k), w.data(),
                    static_cast<blasint>(s.k), 0.0f, c.data(), static_cast<blasint>(s.n));
      });
      openblas_set_num_threads(1);  // the backend's setting
      const TensorView av = make_view(const_cast<float*>(a.data()), ElemType::f32, m, s.k);
      const TensorView cv = make_view(c.data(), ElemType::f32, m, s.n);
      const TensorView wf = make_view(const_cast<float*>(w.data()), ElemType::f32, s.n, s.k);
      const TensorView wbv = make_view(wb.data(), ElemType::bf16, s.n, s.k);
      const double f32 = seconds_per_call([&] { be.gemm(av, wf, cv); });
      const double bf16 = seconds_per_call([&] { be.gemm(av, wbv, cv); });
      std::printf("%-8s %5lld %6lld %5lld %10.1f %10.1f %10.1f %7.0f%%\n", s.name, static_cast<long long>(m),
                  static_cast<long long>(s.n), static_cast<long long>(s.k), flops / raw / 1e9, flops / f32 / 1e9,
                  flops / bf16 / 1e9, 100.0 * raw / f32);
      raw_total += raw;
      f32_total += f32;
      bf16_total += bf16;
      flops_total += flops;
    }
    std::printf("%-8s %5lld %6s %5s %10.1f %10.1f %10.1f %7.0f%%\n", "all", static_cast<long long>(m), "", "",
                flops_total / raw_total / 1e9, flops_total / f32_total / 1e9, flops_total / bf16_total / 1e9,
                100.0 * raw_total / f32_total);
  }
}

// Streaming read: every thread sums its slice of a 256 MiB buffer; and the
// `small` model's decode floor at that bandwidth.
void bench_stream(int threads) {
  const std::size_t stream_floats = 64u << 20;
  std::vector<float> big(stream_floats, 1.0f);
  const double read_s = seconds_per_call([&] {
    std::vector<float> partial(static_cast<std::size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::size_t b = stream_floats * t / threads, e = stream_floats * (t + 1) / threads;
        float lane[16] = {};
        for (std::size_t i = b; i + 16 <= e; i += 16)
          for (int l = 0; l < 16; ++l) lane[l] += big[i + l];
        partial[t] = std::accumulate(lane, lane + 16, 0.0f);
      });
    }
    for (auto& th : pool) th.join();
    sink = sink + std::accumulate(partial.begin(), partial.end(), 0.0f);
  });
  const double bandwidth = static_cast<double>(stream_floats * 4) / read_s / 1e9;
  std::printf("\nstreaming read of 256 MiB: %.1f GB/s\n", bandwidth);
  const double small_weights_f32 = 4.0 * (12 * (768.0 * 1280 + 768 * 768 + 768 * 4096 + 2048 * 768) + 32000 * 768);
  std::printf("small model decode floor (f32 weights %.0f MB / bandwidth): %.2f ms; bf16: %.2f ms\n",
              small_weights_f32 / 1e6, small_weights_f32 / bandwidth / 1e6, small_weights_f32 / 2 / bandwidth / 1e6);
}

// Paged attention decode: 12 heads / 4 kv heads of 64, block 16, shuffled blocks.
void bench_attention(twin::Backend& be) {
  using namespace twin;
  std::printf("\npaged attention decode (12 q heads, 4 kv heads, dim 64, block 16), one layer\n");
  std::printf("%6s %8s %10s %10s\n", "batch", "context", "us/call", "KV GB/s");
  for (auto [batch, ctx] : {std::pair{1, 1024}, {8, 1024}, {32, 512}, {8, 4096}}) {
    const std::int32_t bs = 16, kvh = 4, hd = 64, heads = 12;
    const std::int64_t blocks_per_seq = (ctx + bs - 1) / bs, num_blocks = blocks_per_seq * batch;
    std::vector<float> kc = random_floats(static_cast<std::size_t>(num_blocks * bs * kvh * hd), 3);
    std::vector<float> vc = random_floats(kc.size(), 4);
    const KvCacheView cache{kc.data(), vc.data(), ElemType::f32, num_blocks, bs, kvh, hd};
    std::vector<BlockId> ids(static_cast<std::size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(5));
    std::vector<SeqAttention> seqs;
    for (int s = 0; s < batch; ++s)
      seqs.push_back({s, 1, ctx, std::span<const BlockId>(ids.data() + s * blocks_per_seq, blocks_per_seq)});
    auto q = random_floats(static_cast<std::size_t>(batch * heads * hd), 6);
    std::vector<float> out(q.size());
    const TensorView qv = make_view(q.data(), ElemType::f32, batch, heads * hd);
    const TensorView ov = make_view(out.data(), ElemType::f32, batch, heads * hd);
    const double s = seconds_per_call(
        [&] { be.paged_attention(qv, cache, seqs, {.num_heads = heads, .num_kv_heads = kvh, .head_dim = hd}, ov); });
    const double bytes = 2.0 * batch * ctx * kvh * hd * 4;
    std::printf("%6d %8d %10.1f %10.1f\n", batch, ctx, s * 1e6, bytes / s / 1e9);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // An optional argument (gemm or attention) runs that section and the stream read.
  const std::string only = argc > 1 ? argv[1] : "";
  auto run = [&](const char* section) { return only.empty() || only == section; };
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto be = twin::make_cpu_backend(threads);
  std::printf("cpu backend, %d threads\n\n", threads);
  if (run("gemm")) bench_gemm(*be, threads);
  bench_stream(threads);  // always run: the decode floor needs it
  if (run("attention")) bench_attention(*be);
  return 0;
}
