// bench_runtime: the engine's forward pass on the CPU backend against what the
// machine can do, measured in the same run:
// - decode of the `small` model at batch 1 vs weight bytes / streaming read
//   bandwidth over as many bytes (a decode step must read every weight once),
//   in f32 and with int8 weights;
// - prefill of 512 tokens vs raw cblas_sgemm on the same GEMM shapes;
// - tokens/s for prefill and decode at batch 1, 8 and 32.
// Prints figures; asserts nothing.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/model_runner.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The `small` descriptor (models/descriptors/small.json), written out here so
// the bench links no models/ code.
twin::ModelConfig small_model() {
  twin::ModelConfig c;
  c.name = "small";
  c.hidden_size = 768;
  c.intermediate_size = 2048;
  c.num_layers = 12;
  c.num_heads = 12;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.vocab_size = 32000;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  return c;
}

// Multi-threaded sum over `bytes` of floats, the size of the weights a
// decode step reads: one pass to touch the pages, then the best of 5. Sized
// as the weights, not larger than the caches, because a decode rereads the
// same bytes every step, and a last-level cache larger than the weights (a
// server's L3 can hold 300 MB) keeps part of them, for the decode and this
// read alike. 32 partial sums per thread keep the adds off the critical path.
double stream_read_gbps(unsigned threads, std::size_t bytes) {
  const std::size_t n = bytes / sizeof(float);
  std::vector<float> data(n, 1.0f);
  double best = 0;
  std::vector<double> sums(threads);
  for (int rep = 0; rep < 6; ++rep) {
    const auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        float acc[32] = {};
        for (std::size_t i = lo; i + 32 <= hi; i += 32) {
          for (int k = 0; k < 32; ++k) acc[k] += data[i + static_cast<std::size_t>(k)];
        }
        sums[t] = std::accumulate(acc, acc + 32, 0.0);
      });
    }
    for (auto& th : pool) th.join();
    if (rep > 0) best = std::max(best, static_cast<double>(n * sizeof(float)) / seconds(t0, Clock::now()) / 1e9);
  }
  if (std::accumulate(sums.begin(), sums.end(), 0.0) < 0) std::puts("");  // keep the reads
  return best;
}

struct Seq {
  std::vector<twin::BlockId> table;
  std::vector<twin::TokenId> tokens;
};

// b sequences; prefill `prompt` tokens each in one step, then `decode_steps` decodes.
// Returns {prefill seconds, decode seconds per step}.
std::pair<double, double> run_batch(twin::ModelRunner& runner, int b, int prompt, int decode_steps) {
  const int bs = runner.options().block_size;
  const int blocks_per_seq = (prompt + decode_steps + bs - 1) / bs;
  std::vector<Seq> seqs(static_cast<std::size_t>(b));
  for (int i = 0; i < b; ++i) {
    auto& s = seqs[static_cast<std::size_t>(i)];
    for (int k = 0; k < blocks_per_seq; ++k) s.table.push_back(i * blocks_per_seq + k);
    for (int k = 0; k < prompt; ++k) s.tokens.push_back((i * 7919 + k * 31) % 32000);
  }
  twin::ForwardBatch batch;
  twin::ForwardOutput out;
  for (int i = 0; i < b; ++i) {
    auto& s = seqs[static_cast<std::size_t>(i)];
    batch.seqs.push_back({i, 0, prompt, s.table, true});
    batch.tokens.insert(batch.tokens.end(), s.tokens.begin(), s.tokens.end());
  }
  const auto t0 = Clock::now();
  runner.forward(batch, out);
  const double prefill = seconds(t0, Clock::now());
  for (int i = 0; i < b; ++i) seqs[static_cast<std::size_t>(i)].tokens.push_back(out.sampled[static_cast<std::size_t>(i)]);
  const auto t1 = Clock::now();
  for (int step = 0; step < decode_steps; ++step) {
    batch.clear();
    for (int i = 0; i < b; ++i) {
      auto& s = seqs[static_cast<std::size_t>(i)];
      batch.seqs.push_back({i, static_cast<std::int32_t>(s.tokens.size()) - 1, 1, s.table, true});
      batch.tokens.push_back(s.tokens.back());
    }
    runner.forward(batch, out);
    for (int i = 0; i < b; ++i) seqs[static_cast<std::size_t>(i)].tokens.push_back(out.sampled[static_cast<std::size_t>(i)]);
  }
  return {prefill, seconds(t1, Clock::now()) / decode_steps};
}

// Raw SGEMM over the layer GEMM shapes of a 512-token prefill (A[m,k]·W[n,k]^T).
double raw_sgemm_seconds(const twin::ModelConfig& c, int m) {
  const int H = static_cast<int>(c.hidden_size), I = static_cast<int>(c.intermediate_size);
  const int qkv = static_cast<int>(c.q_dim() + 2 * c.kv_dim());
  const std::vector<std::pair<int, int>> shapes = {{qkv, H}, {H, static_cast<int>(c.q_dim())}, {2 * I, H}, {H, I}};
  std::vector<float> a(static_cast<std::size_t>(m) * static_cast<std::size_t>(std::max(H, I)), 0.01f);
  std::vector<float> w(static_cast<std::size_t>(2 * I) * static_cast<std::size_t>(std::max(H, I)), 0.02f);
  std::vector<float> out(static_cast<std::size_t>(m) * static_cast<std::size_t>(2 * I));
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    for (int l = 0; l < c.num_layers; ++l) {
      for (const auto& [n, k] : shapes) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, w.data(), k, 0.0f, out.data(), n);
      }
    }
    best = std::min(best, seconds(t0, Clock::now()));
  }
  return best;
}

double layer_gemm_flops(const twin::ModelConfig& c, int m) {
  const double H = double(c.hidden_size), I = double(c.intermediate_size);
  const double per_token = H * double(c.q_dim() + 2 * c.kv_dim()) + double(c.q_dim()) * H + 3 * H * I;
  return 2.0 * m * per_token * double(c.num_layers);
}

}  // namespace

int main() {
  const twin::ModelConfig model = small_model();
  twin::RunnerOptions options;
  options.num_blocks = 32 * 40;  // 32 seqs x 640 tokens
  options.block_size = 16;
  options.seed = 1;
  options.weight_dtype = "f32";
  twin::ModelRunner runner(model, options);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::printf("bench_runtime: model small (%.1f M params as stored %.1f MB f32) on %s\n",
              double(runner.weight_bytes()) / 4e6, double(runner.weight_bytes()) / 1e6, runner.device_name().c_str());

  const double dram_gbps = stream_read_gbps(threads, std::size_t{768} << 20);
  std::printf("streaming read of 768 MB (%u threads, beyond most caches): %.2f GB/s\n", threads, dram_gbps);
  const double gbps = stream_read_gbps(threads, static_cast<std::size_t>(runner.weight_bytes()));
  run_batch(runner, 1, 16, 2);  // warm up: pages, thread pool
  const auto [p1, d1] = run_batch(runner, 1, 128, 32);
  const double bound_s = double(runner.weight_bytes()) / (gbps * 1e9);
  std::printf("streaming read of the f32 weights' %.0f MB: %.2f GB/s; weight bytes / bandwidth = %.2f ms\n",
              double(runner.weight_bytes()) / 1e6, gbps, bound_s * 1e3);
  std::printf("decode batch 1 at context ~128: %.2f ms/token = %.2f x the bandwidth bound (target <= 2x)\n", d1 * 1e3,
              d1 / bound_s);

  // Weight-only int8 (run --quantization int8): the same model with its
  // projections in int8 and per-channel scales; the bound is its stored bytes
  // over the streaming bandwidth (issue 20's target: within 1.3x). On a
  // shared machine the bandwidth a run gets swings 3x within minutes, so
  // each of 3 rounds measures the bandwidth, the int8 decode and the f32
  // decode back to back, and the round with the lowest ratio is printed
  // (each figure's best would pair moments apart).
  {
    twin::RunnerOptions q = options;
    q.quantization = "int8";
    twin::ModelRunner int8(model, q);
    run_batch(int8, 1, 16, 2);
    double best_ratio = 1e30, best_gbps = 0, best_d8 = 0, best_d32 = 0;
    std::string rounds;  // every round's ratio, printed beside the best
    for (int round = 0; round < 3; ++round) {
      const double round_gbps = stream_read_gbps(threads, static_cast<std::size_t>(int8.weight_bytes()));
      const double d8 = run_batch(int8, 1, 128, 32).second;
      const double d32 = run_batch(runner, 1, 128, 32).second;
      const double ratio = d8 / (double(int8.weight_bytes()) / (round_gbps * 1e9));
      if (ratio < best_ratio) best_ratio = ratio, best_gbps = round_gbps, best_d8 = d8, best_d32 = d32;
      rounds += (round > 0 ? ", " : "") + std::to_string(ratio).substr(0, 4);
    }
    const double bound8 = double(int8.weight_bytes()) / (best_gbps * 1e9);
    std::printf("int8 weight-only: %.1f MB stored; decode batch 1 at context ~128: %.2f ms/token = %.2f x its "
                "bandwidth bound %.2f ms at %.2f GB/s (its %.0f MB streamed; target <= 1.3x; best of 3 rounds: %s), "
                "%.2fx faster than f32 in the same round (%.2f ms/token)\n",
                double(int8.weight_bytes()) / 1e6, best_d8 * 1e3, best_ratio, bound8 * 1e3, best_gbps,
                double(int8.weight_bytes()) / 1e6, rounds.c_str(), best_d32 / best_d8, best_d32 * 1e3);
  }

  const auto [p512, unused] = run_batch(runner, 1, 512, 0);
  (void)unused;
  const double raw = raw_sgemm_seconds(model, 512);
  const double flops = layer_gemm_flops(model, 512);
  std::printf("prefill 512 tokens: %.1f ms, %.1f GFLOP/s on the layer GEMMs; raw cblas_sgemm on the same shapes "
              "%.1f ms, %.1f GFLOP/s -> %.0f%% of SGEMM (target >= 60%%)\n",
              p512 * 1e3, flops / p512 / 1e9, raw * 1e3, flops / raw / 1e9, 100.0 * raw / p512);

  std::printf("%-6s %18s %18s  (prompt 64 tokens each, context ~64)\n", "batch", "prefill tok/s", "decode tok/s");
  for (int b : {1, 8, 32}) {
    const auto [pre, dec] = run_batch(runner, b, 64, 4);
    std::printf("%-6d %18.0f %18.1f\n", b, b * 64 / pre, b / dec);
  }
  return 0;
}
