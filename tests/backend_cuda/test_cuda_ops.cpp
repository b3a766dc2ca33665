// Every backend op on CUDA against the CPU reference, on random inputs, with
// per-op tolerances: element-wise ops nearly exact, f32 GEMM and attention
// to float rounding, bf16 GEMM looser (the GPU rounds A to bf16 as well).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "engine/backend/fp8_rows.hpp"
#include "tests/backend_cuda/cuda_test_util.hpp"

namespace twin::test {
namespace {

using Result = std::vector<float>;

// Runs f on both backends; returns {cpu, gpu}.
std::pair<Result, Result> both(BackendPair& be, const std::function<Result(Backend&)>& f) {
  Result a = f(*be.cpu);
  Result b = f(*be.gpu);
  return {a, b};
}

// A [rows, cols] f32 tensor inside a wider buffer (row stride cols + 3).
struct Strided {
  DeviceTensor t;
  TensorView view;
};
Strided strided(Backend& b, const std::vector<float>& host, std::int64_t rows, std::int64_t cols) {
  std::vector<float> wide(static_cast<std::size_t>(rows * (cols + 3)), -7.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy(host.begin() + r * cols, host.begin() + (r + 1) * cols, wide.begin() + r * (cols + 3) + 1);
  }
  Strided s{to_device(b, wide, rows, cols + 3), {}};
  s.view = s.t.view.slice_cols(1, cols);  // column 0 and the last 2 stay padding
  return s;
}

}  // namespace

TEST_CASE("copy converts f32 <-> bf16 <-> f16 on strided views, and fill sets f32") {
  BackendPair be;
  const auto x = random_floats(9 * 21, 1, 3.0f);
  auto [cpu, gpu] = both(be, [&](Backend& b) {
    Strided src = strided(b, x, 9, 21);
    DeviceTensor bf = zeros(b, 9, 21, ElemType::bf16), hf = zeros(b, 9, 21, ElemType::f16), back = zeros(b, 9, 21);
    b.copy(src.view, bf.view);
    b.copy(bf.view, hf.view);
    b.copy(hf.view, back.view);
    DeviceTensor filled = zeros(b, 4, 5);
    b.fill(filled.view.slice_rows(1, 2), 2.5f);
    Result r = to_host(b, back.view);
    const Result f = to_host(b, filled.view);
    r.insert(r.end(), f.begin(), f.end());
    return r;
  });
  CHECK(cpu == gpu);  // conversions are exact bit arithmetic on both
}

TEST_CASE("gemm: f32 weights to float rounding, bf16 weights within bf16 tolerance, bias and accumulate") {
  BackendPair be;
  SECTION("f32 W, strided A, one row and many rows") {
    for (std::int64_t m : {1, 5, 67}) {
      const std::int64_t n = 70, k = 33;
      const auto a = random_floats(static_cast<std::size_t>(m * k), 2), w = random_floats(n * k, 3);
      auto [cpu, gpu] = both(be, [&](Backend& b) {
        Strided av = strided(b, a, m, k);
        DeviceTensor wv = to_device(b, w, n, k), c = zeros(b, m, n);
        b.gemm(av.view, wv.view, c.view);
        return to_host(b, c.view);
      });
      INFO("m " << m);
      CHECK(max_rel_diff(gpu, cpu) < 1e-4);
    }
  }
  SECTION("bf16 W with bf16 bias and accumulate") {
    const std::int64_t m = 37, n = 129, k = 64;
    const auto a = random_floats(m * k, 4), w = random_floats(n * k, 5), c0 = random_floats(m * n, 6);
    const auto bias = random_floats(n, 7);
    auto [cpu, gpu] = both(be, [&](Backend& b) {
      DeviceTensor av = to_device(b, a, m, k), wv = to_device(b, to_bf16(w), ElemType::bf16, n, k);
      DeviceTensor bv = to_device(b, to_bf16(bias), ElemType::bf16, 1, n), c = to_device(b, c0, m, n);
      GemmOptions o;
      o.bias = &bv.view;
      o.accumulate = true;
      b.gemm(av.view, wv.view, c.view, o);
      return to_host(b, c.view);
    });
    // A rounded to bf16 on the GPU: |error| <~ sqrt(k) * 2^-9 * |a||w|.
    CHECK(max_abs_diff(gpu, cpu) < 0.05);
  }
  SECTION("fp8 W8A8 (cuBLASLt, compute capability 8.9+): the cpu's quantisation and scales, f32 accumulation") {
    // Both backends scale A per row and W per channel into the same E4M3
    // bytes; the products of E4M3 values are exact, so only the order of
    // the f32 sums differs. A strided A, a zero row, accumulate and a bias.
    for (std::int64_t m : {1, 37, 300}) {
      const std::int64_t n = 144, k = 96;
      auto a = random_floats(static_cast<std::size_t>(m * k), 8, 2.0f);
      for (std::int64_t x = 0; x < k; ++x) a[static_cast<std::size_t>(x)] = 0.0f;
      const auto w = random_floats(n * k, 9, 0.2f), c0 = random_floats(m * n, 10), bias = random_floats(n, 11);
      std::vector<std::uint8_t> wq(static_cast<std::size_t>(n * k));
      std::vector<float> ws(static_cast<std::size_t>(n));
      for (std::int64_t r = 0; r < n; ++r) {
        ws[r] = fp8_row_scale(w.data() + r * k, k);
        quantize_row_fp8(w.data() + r * k, k, ws[r], wq.data() + r * k);
      }
      auto run = [&](Backend& b) {
        Strided av = strided(b, a, m, k);
        DeviceTensor wv = to_device(b, wq, ElemType::f8e4m3, n, k), sv = to_device(b, ws, 1, n);
        DeviceTensor bv = to_device(b, bias, 1, n), c = to_device(b, c0, m, n);
        GemmOptions o;
        o.w_scales = &sv.view;
        o.bias = &bv.view;
        o.accumulate = true;
        b.gemm(av.view, wv.view, c.view, o);
        return to_host(b, c.view);
      };
      INFO("m " << m);
      Result gpu;
      try {
        gpu = run(*be.gpu);
      } catch (const Error& e) {  // an A100 has no fp8 tensor cores: refused by name, nothing else
        CHECK_THAT(e.what(), Catch::Contains("compute capability 8.9"));
        continue;
      }
      // Hopper's fp8 tensor cores add the products of one MMA (32 along k)
      // in an accumulator narrower than f32: about 14 bits (DeepSeek-V3
      // technical report, 3.3.2), so such a sum is exact to 32 x 2^-14 =
      // 2^-9 of its absolute products. The H200 (2026-12-04) was off by
      // 1.3e-3 against a flat 1e-3 at m 300, where cuBLASLt takes a wgmma
      // kernel; a wrong scale or layout is off by the values themselves.
      const Result cpu = run(*be.cpu);
      REQUIRE(gpu.size() == cpu.size());
      double worst = 0.0;  // |error| / bound, the largest over C
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          double abs_products = 0.0;
          for (std::int64_t x = 0; x < k; ++x) {
            abs_products += std::fabs(a[static_cast<std::size_t>(i * k + x)] * w[static_cast<std::size_t>(j * k + x)]);
          }
          const double bound = 1.07 * abs_products / 512.0 + 1e-5;  // 1.07: E4M3 rounds to within 2^-4
          const auto at = static_cast<std::size_t>(i * n + j);
          worst = std::max(worst, std::fabs(static_cast<double>(gpu[at]) - cpu[at]) / bound);
        }
      }
      CHECK(worst <= 1.0);
    }
  }
  SECTION("an unsupported W dtype names the op and the dtype") {
    DeviceTensor a = zeros(*be.gpu, 2, 4), w = zeros(*be.gpu, 3, 4, ElemType::f16), c = zeros(*be.gpu, 2, 3);
    CHECK_THROWS_WITH(be.gpu->gemm(a.view, w.view, c.view), Catch::Contains("gemm") && Catch::Contains("f16"));
  }
}

TEST_CASE("embedding, gather_rows, add, rmsnorm, add_rmsnorm, silu_and_mul match the cpu") {
  BackendPair be;
  const std::int64_t T = 7, H = 96, V = 50;
  const auto table = random_floats(V * H, 8), x = random_floats(T * H, 9, 4.0f), d = random_floats(T * H, 10);
  const auto wn = random_floats(H, 11), gu = random_floats(T * 2 * H, 12, 6.0f);
  const std::vector<TokenId> ids = {3, 49, 0, 3, 17, 22, 8};
  const std::vector<std::int32_t> rows = {6, 0, 2};
  auto [cpu, gpu] = both(be, [&](Backend& b) {
    Result r;
    auto append = [&](const Result& v) { r.insert(r.end(), v.begin(), v.end()); };
    DeviceTensor tab = to_device(b, to_bf16(table), ElemType::bf16, V, H), emb = zeros(b, T, H);
    b.embedding(ids, tab.view, emb.view);
    append(to_host(b, emb.view));
    DeviceTensor xs = to_device(b, x, T, H), g = zeros(b, 3, H);
    b.gather_rows(xs.view, rows, g.view);
    append(to_host(b, g.view));
    Strided ds = strided(b, d, T, H);
    b.add(xs.view, ds.view);
    append(to_host(b, xs.view));
    DeviceTensor w = to_device(b, to_bf16(wn), ElemType::bf16, 1, H), out = zeros(b, T, H);
    b.rmsnorm(xs.view, w.view, 1e-5f, out.view);
    append(to_host(b, out.view));
    b.add_rmsnorm(xs.view, ds.view, w.view, 1e-6f, out.view);
    append(to_host(b, xs.view));
    append(to_host(b, out.view));
    DeviceTensor guv = to_device(b, gu, T, 2 * H), act = zeros(b, T, H);
    b.silu_and_mul(guv.view, act.view);
    append(to_host(b, act.view));
    return r;
  });
  CHECK(max_rel_diff(gpu, cpu) < 1e-5);
}

TEST_CASE("rotary matches the cpu: full and partial rotary_dim, GQA widths, llama3 scaling") {
  BackendPair be;
  for (std::int32_t rot : {0, 8, -1}) {  // -1: full, with Llama 3.1's rope_scaling
    const std::int64_t T = 6, hd = 16, qh = 4, kh = 2;
    const auto q = random_floats(T * qh * hd, 13), k = random_floats(T * kh * hd, 14);
    const std::vector<std::int32_t> pos = {0, 1, 7, 100, 4095, 131071};
    auto [cpu, gpu] = both(be, [&](Backend& b) {
      DeviceTensor qv = to_device(b, q, T, qh * hd);
      Strided kv = strided(b, k, T, kh * hd);
      RopeConfig rope;
      rope.head_dim = static_cast<std::int32_t>(hd);
      rope.rotary_dim = rot < 0 ? 0 : rot;
      rope.theta = 500000.0f;
      if (rot < 0) {
        rope.scaling = RopeScaling::llama3;
        rope.factor = 8.0;
        rope.original_max_position = 64;  // so head_dim 16's pairs fall in all three bands
      }
      b.rotary(qv.view, kv.view, pos, rope);
      Result r = to_host(b, qv.view);
      const Result kr = to_host(b, kv.view);
      r.insert(r.end(), kr.begin(), kr.end());
      return r;
    });
    INFO("rotary_dim " << rot);
    CHECK(max_abs_diff(gpu, cpu) < 1e-5);
  }
}

namespace {

struct AttnCase {
  std::int32_t num_heads, kv_heads, head_dim, block_size, window;
  std::vector<std::pair<std::int32_t, std::int32_t>> seqs;  // (num_query, context_len)
};

// Writes every sequence's whole context with kv_write (scattered blocks),
// then runs one paged_attention over all of them.
// An fp8 cache takes scales that are not powers of two, so the division
// before rounding is exercised (both backends quantise the same way).
constexpr float kFp8KScale = 1.37f, kFp8VScale = 0.71f;

Result run_attention(Backend& b, const AttnCase& c, ElemType cache_dtype, bool round_kv) {
  const std::int32_t width = c.kv_heads * c.head_dim;
  std::int32_t total_q = 0, blocks = 0;
  for (auto [nq, ctx] : c.seqs) {
    total_q += nq;
    blocks += (ctx + c.block_size - 1) / c.block_size;
  }
  const std::int32_t num_blocks = blocks + 3;
  std::vector<BlockId> ids(static_cast<std::size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::uint32_t salt = 99;
  for (std::size_t i = ids.size(); i > 1; --i) {
    salt = salt * 1664525u + 1013904223u;
    std::swap(ids[i - 1], ids[salt % i]);
  }
  KvCacheView cache;
  cache.dtype = cache_dtype;
  cache.num_blocks = num_blocks;
  cache.block_size = c.block_size;
  cache.kv_heads = c.kv_heads;
  cache.head_dim = c.head_dim;
  if (cache_dtype == ElemType::f8e4m3) {
    cache.k_scale = kFp8KScale;
    cache.v_scale = kFp8VScale;
  }
  Buffer kb = b.allocate(static_cast<std::size_t>(cache.bytes_per_tensor()));
  Buffer vb = b.allocate(static_cast<std::size_t>(cache.bytes_per_tensor()));
  cache.k = kb.data();
  cache.v = vb.data();

  std::vector<std::vector<BlockId>> tables;
  std::vector<SeqAttention> seqs;
  std::int32_t next_block = 0, q_row = 0, s_index = 0;
  for (auto [nq, ctx] : c.seqs) {
    const std::int32_t nb = (ctx + c.block_size - 1) / c.block_size;
    tables.emplace_back(ids.begin() + next_block, ids.begin() + next_block + nb);
    next_block += nb;
    auto k = random_floats(static_cast<std::size_t>(ctx) * width, 100 + s_index);
    auto v = random_floats(static_cast<std::size_t>(ctx) * width, 200 + s_index);
    if (round_kv) {
      k = bf16_round(k);
      v = bf16_round(v);
    }
    std::vector<std::int64_t> slots(static_cast<std::size_t>(ctx));
    for (std::int32_t p = 0; p < ctx; ++p) {
      slots[p] = static_cast<std::int64_t>(tables.back()[p / c.block_size]) * c.block_size + p % c.block_size;
    }
    DeviceTensor kt = to_device(b, k, ctx, width), vt = to_device(b, v, ctx, width);
    b.kv_write(kt.view, vt.view, cache, slots);
    seqs.push_back({q_row, nq, ctx, {}});
    q_row += nq;
    ++s_index;
  }
  for (std::size_t i = 0; i < seqs.size(); ++i) seqs[i].block_table = tables[i];
  const std::int64_t qw = static_cast<std::int64_t>(c.num_heads) * c.head_dim;
  const auto q = random_floats(static_cast<std::size_t>(total_q) * qw, 300);
  DeviceTensor qt = to_device(b, q, total_q, qw), out = zeros(b, total_q, qw);
  AttentionShape shape;
  shape.num_heads = c.num_heads;
  shape.num_kv_heads = c.kv_heads;
  shape.head_dim = c.head_dim;
  shape.sliding_window = c.window;
  b.paged_attention(qt.view, cache, seqs, shape, out.view);
  return to_host(b, out.view);
}

// A CUDA backend made with TWIN_CUDA_ATTENTION=reference: prefill chunks on
// the f32 tiled kernel instead of the bf16 tensor-core one.
std::unique_ptr<Backend> reference_attention_backend() {
  const char* old = std::getenv("TWIN_CUDA_ATTENTION");
  const std::string saved = old != nullptr ? old : "";
  setenv("TWIN_CUDA_ATTENTION", "reference", 1);
  std::unique_ptr<Backend> b = make_cuda_backend(0);
  if (old != nullptr) {
    setenv("TWIN_CUDA_ATTENTION", saved.c_str(), 1);
  } else {
    unsetenv("TWIN_CUDA_ATTENTION");
  }
  return b;
}

}  // namespace

// Chunks of 4+ new tokens take the tiled prefill kernel (16 rows a tile,
// keys 32 at a time); decodes and shorter chunks the split-K kernel. The
// tensor-core kernel (bf16) is switched off here so f32 is held to float
// rounding; it has its own case below.
TEST_CASE("paged_attention matches the cpu: decodes (split-K past 256 keys), prefill chunks, GQA, windows") {
  BackendPair be;
  be.gpu = reference_attention_backend();
  const std::vector<AttnCase> cases = {
      {4, 2, 16, 4, 0, {{1, 1}, {1, 37}, {1, 700}, {5, 5}, {9, 300}}},
      {8, 1, 64, 16, 0, {{33, 33}, {1, 1024}, {17, 530}}},
      {4, 4, 128, 1, 0, {{3, 10}, {1, 257}, {4, 4}}},
      {4, 2, 32, 8, 50, {{1, 600}, {20, 90}}},
      // head sizes that are not a multiple of 32, a long chunk over a long
      // context, and 256 (shared memory past 48 KB: the kernel opts in)
      {8, 2, 80, 16, 0, {{40, 1000}, {4, 4}, {1, 300}}},
      {2, 2, 96, 32, 0, {{19, 19}, {2, 70}}},
      {4, 1, 256, 8, 100, {{70, 500}, {16, 16}}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const Result cpu = run_attention(*be.cpu, cases[i], ElemType::f32, false);
    const Result gpu = run_attention(*be.gpu, cases[i], ElemType::f32, false);
    CHECK(max_abs_diff(gpu, cpu) < 2e-5);
    // A bf16 cache on the GPU equals the CPU on bf16-rounded K and V.
    const Result cpu_r = run_attention(*be.cpu, cases[i], ElemType::f32, true);
    const Result gpu_bf = run_attention(*be.gpu, cases[i], ElemType::bf16, false);
    CHECK(max_abs_diff(gpu_bf, cpu_r) < 2e-5);
    // An fp8 cache with scales: the same bytes on both (kv_write's
    // quantisation), the same f32 arithmetic after dequantising.
    const Result cpu8 = run_attention(*be.cpu, cases[i], ElemType::f8e4m3, false);
    const Result gpu8 = run_attention(*be.gpu, cases[i], ElemType::f8e4m3, false);
    CHECK(max_abs_diff(gpu8, cpu8) < 2e-5);
  }
}

// The tensor-core prefill kernel (cuda_attention_mma.cu) rounds Q, K, V and
// the softmax weights to bf16 (f32 scores, softmax and sums). Tolerance
// 1.5e-2 absolute on outputs of inputs uniform in [-1, 1]: bf16's relative
// rounding is 2^-9 per operand; the host emulation of this kernel
// (test_attention_mma_host.cpp) measures at most ~3.5e-3 against exact
// attention over 240 random shapes, so this leaves a 4x margin for the
// hardware's f32 summation order and exp2 approximation. The f32 tiled
// kernel (TWIN_CUDA_ATTENTION=reference) is compared the same way, and
// should differ from the tensor-core path (it proves the latter ran).
TEST_CASE("paged_attention on tensor cores matches the cpu and the f32 tiled kernel within bf16 rounding") {
  BackendPair be;
  const std::unique_ptr<Backend> ref = reference_attention_backend();
  const bool forced_reference = std::getenv("TWIN_CUDA_ATTENTION") != nullptr &&
                                std::string(std::getenv("TWIN_CUDA_ATTENTION")) == "reference";
  const std::vector<AttnCase> cases = {
      // heads, kv heads, head_dim, block size, window, {(new, context)}
      {4, 4, 128, 16, 0, {{16, 16}, {100, 100}, {65, 65}}},         // rows not a multiple of 64
      {8, 2, 128, 256, 0, {{300, 1000}, {4, 4}, {1, 40}}},          // GQA 4, a chunk after a cached prefix, a decode
      {16, 2, 64, 1, 0, {{77, 77}, {33, 200}}},                     // GQA 8, token-level KV
      {4, 1, 64, 16, 100, {{257, 257}, {64, 500}}},                 // GQA 4, sliding window
      {2, 2, 128, 16, 37, {{130, 300}}},                            // window not a multiple of anything
      {8, 1, 128, 256, 0, {{2048, 2048}}},                          // a long prompt, GQA 8
      {4, 4, 64, 256, 0, {{512, 1536}, {20, 20}}},                  // a long chunk after a long prefix
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const Result cpu = run_attention(*be.cpu, cases[i], ElemType::f32, false);
    const Result gpu = run_attention(*be.gpu, cases[i], ElemType::f32, false);
    const Result tiled = run_attention(*ref, cases[i], ElemType::f32, false);
    CHECK(max_abs_diff(gpu, cpu) < 1.5e-2);
    CHECK(max_abs_diff(gpu, tiled) < 1.5e-2);
    CHECK(max_abs_diff(tiled, cpu) < 2e-5);
    if (!forced_reference) CHECK(max_abs_diff(gpu, tiled) > 1e-6);  // the bf16 path did run
    // bf16 cache: against the CPU on bf16-rounded K and V.
    const Result cpu_r = run_attention(*be.cpu, cases[i], ElemType::f32, true);
    const Result gpu_bf = run_attention(*be.gpu, cases[i], ElemType::bf16, false);
    const Result tiled_bf = run_attention(*ref, cases[i], ElemType::bf16, false);
    CHECK(max_abs_diff(gpu_bf, cpu_r) < 1.5e-2);
    CHECK(max_abs_diff(gpu_bf, tiled_bf) < 1.5e-2);
    // fp8 cache: dequantised (times its scale) and rounded to bf16 in the kernel.
    const Result cpu8 = run_attention(*be.cpu, cases[i], ElemType::f8e4m3, false);
    const Result gpu8 = run_attention(*be.gpu, cases[i], ElemType::f8e4m3, false);
    CHECK(max_abs_diff(gpu8, cpu8) < 1.5e-2);
    CHECK(std::all_of(gpu8.begin(), gpu8.end(), [](float x) { return std::isfinite(x); }));
    CHECK(std::all_of(gpu.begin(), gpu.end(), [](float x) { return std::isfinite(x); }));
    CHECK(std::all_of(gpu_bf.begin(), gpu_bf.end(), [](float x) { return std::isfinite(x); }));
  }
}

// The GQA decode kernel (cuda_attention_decode.cu): every decode row and
// short chunk with head_dim % 8 == 0 takes it. GQA ratios 1, 4, 8 and MQA;
// head sizes 64, 80, 128, 256; contexts 1, 17, 4096, 33000 (batch 1: many
// split-K partitions) and batch 64 (few); windows; block sizes 1, 16, 64;
// f32 and bf16 caches. head_dim 12 takes the per-head fallback kernel.
TEST_CASE("paged_attention decode kernel matches the cpu: GQA 1/4/8/MQA, head sizes to 256, 33k contexts, batch 64") {
  BackendPair be;
  std::vector<std::pair<std::int32_t, std::int32_t>> batch64;
  for (std::int32_t i = 0; i < 64; ++i) batch64.push_back({1 + i % 3, 1 + (i * 37) % 700});
  const std::vector<AttnCase> cases = {
      {8, 8, 64, 16, 0, {{1, 1}, {1, 17}, {1, 4096}}},          // ratio 1
      {32, 8, 128, 16, 0, {{1, 33000}}},                        // Llama-3.1-8B at 33k, batch 1
      {32, 8, 128, 16, 0, batch64},                             // batch 64, chunks of 1-3 rows
      {16, 2, 80, 64, 0, {{1, 17}, {2, 4096}, {3, 300}}},       // ratio 8, head_dim 80
      {16, 1, 256, 1, 0, {{1, 1}, {1, 17}, {1, 2000}}},         // MQA 16 heads (two head blocks), 256
      {12, 1, 64, 16, 0, {{1, 4096}, {1, 5}}},                  // MQA 12: a partial second head block
      {8, 2, 128, 16, 1000, {{1, 33000}, {1, 900}, {2, 1001}}}, // sliding window over a long context
      {4, 4, 256, 64, 37, {{1, 4096}, {3, 40}}},
      {6, 2, 12, 16, 0, {{1, 300}, {2, 17}}},                   // head_dim 12: the fallback
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const Result cpu = run_attention(*be.cpu, cases[i], ElemType::f32, false);
    const Result gpu = run_attention(*be.gpu, cases[i], ElemType::f32, false);
    CHECK(max_abs_diff(gpu, cpu) < 2e-5);
    const Result cpu_r = run_attention(*be.cpu, cases[i], ElemType::f32, true);
    const Result gpu_bf = run_attention(*be.gpu, cases[i], ElemType::bf16, false);
    CHECK(max_abs_diff(gpu_bf, cpu_r) < 2e-5);
    const Result cpu8 = run_attention(*be.cpu, cases[i], ElemType::f8e4m3, false);  // 8-byte lane loads
    const Result gpu8 = run_attention(*be.gpu, cases[i], ElemType::f8e4m3, false);
    CHECK(max_abs_diff(gpu8, cpu8) < 2e-5);
  }
}

TEST_CASE("rmsnorm, add_rmsnorm, silu_and_mul: the vectorised rows (4096, 8192 wide) and the fallbacks match the cpu") {
  BackendPair be;
  for (std::int64_t H : {4096, 8192, 8196, 100, 6}) {  // 8196: past the register rows; 6: not a multiple of 4
    for (ElemType wd : {ElemType::f32, ElemType::bf16}) {
      const std::int64_t T = 3;
      const auto x = random_floats(static_cast<std::size_t>(T * H), 70, 4.0f), d = random_floats(static_cast<std::size_t>(T * H), 71);
      const auto wn = random_floats(static_cast<std::size_t>(H), 72), gu = random_floats(static_cast<std::size_t>(T * 2 * H), 73, 6.0f);
      auto [cpu, gpu] = both(be, [&](Backend& b) {
        Result r;
        auto append = [&](const Result& v) { r.insert(r.end(), v.begin(), v.end()); };
        DeviceTensor xs = to_device(b, x, T, H), ds = to_device(b, d, T, H), out = zeros(b, T, H);
        DeviceTensor w = wd == ElemType::bf16 ? to_device(b, to_bf16(wn), ElemType::bf16, 1, H) : to_device(b, wn, 1, H);
        b.rmsnorm(xs.view, w.view, 1e-5f, out.view);
        append(to_host(b, out.view));
        b.add_rmsnorm(xs.view, ds.view, w.view, 1e-6f, out.view);
        append(to_host(b, xs.view));
        append(to_host(b, out.view));
        DeviceTensor guv = to_device(b, gu, T, 2 * H), act = zeros(b, T, H);
        b.silu_and_mul(guv.view, act.view);
        append(to_host(b, act.view));
        return r;
      });
      INFO("H " << H << " weight " << elem_type_name(wd));
      CHECK(max_rel_diff(gpu, cpu) < 1e-5);
    }
  }
}

TEST_CASE("greedy argmax at odd vocabularies (the scalar path) and tiny ones") {
  BackendPair be;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t V : {1, 3, 4097, 128257}) {
    std::vector<float> logits = random_floats(static_cast<std::size_t>(4 * V), 64, 5.0f);
    logits[static_cast<std::size_t>(V - 1)] = 60.0f;  // row 0: the last id
    if (V > 2) {
      logits[static_cast<std::size_t>(V + 1)] = 60.0f;  // row 1: a tie, the lower id wins
      logits[static_cast<std::size_t>(2 * V - 1)] = 60.0f;
    }
    logits[static_cast<std::size_t>(2 * V)] = nan;  // row 2: NaN at id 0
    std::vector<SamplingParams> params(4);
    std::vector<TokenId> a(4), g(4);
    DeviceTensor lc = to_device(*be.cpu, logits, 4, V), lg = to_device(*be.gpu, logits, 4, V);
    be.cpu->sample(lc.view, params, a);
    be.gpu->sample(lg.view, params, g);
    INFO("V " << V);
    CHECK(a == g);
    CHECK(g[2] == 0);
  }
}

TEST_CASE("kv_write skips negative slots, and copy_blocks swaps out to pinned host memory and back") {
  BackendPair be;
  auto [cpu, gpu] = both(be, [&](Backend& b) {
    KvCacheView dev;
    dev.num_blocks = 6;
    dev.block_size = 2;
    dev.kv_heads = 2;
    dev.head_dim = 4;
    KvCacheView host = dev;
    host.num_blocks = 3;
    Buffer dk = b.allocate(static_cast<std::size_t>(dev.bytes_per_tensor()));
    Buffer dv = b.allocate(static_cast<std::size_t>(dev.bytes_per_tensor()));
    Buffer hk = b.allocate(static_cast<std::size_t>(host.bytes_per_tensor()), MemoryKind::host);
    Buffer hv = b.allocate(static_cast<std::size_t>(host.bytes_per_tensor()), MemoryKind::host);
    dev.k = dk.data();
    dev.v = dv.data();
    host.k = hk.data();
    host.v = hv.data();
    const std::int64_t elems = dev.num_blocks * dev.block_elems();
    std::vector<float> zero(static_cast<std::size_t>(elems), 0.0f);
    b.upload(dev.k, zero.data(), zero.size() * 4);
    b.upload(dev.v, zero.data(), zero.size() * 4);
    DeviceTensor k = to_device(b, random_floats(5 * 8, 20), 5, 8), v = to_device(b, random_floats(5 * 8, 21), 5, 8);
    b.kv_write(k.view, v.view, dev, std::vector<std::int64_t>{0, -1, 5, 11, 3});
    b.copy_blocks(dev, host, std::vector<BlockCopy>{{2, 0}, {5, 2}});   // swap out
    b.copy_blocks(host, dev, std::vector<BlockCopy>{{0, 4}, {2, 1}});   // swap in elsewhere
    b.copy_blocks(dev, dev, std::vector<BlockCopy>{{1, 3}});           // copy-on-write
    Result r(static_cast<std::size_t>(elems * 2));
    b.download(r.data(), dev.k, static_cast<std::size_t>(elems) * 4);
    b.download(r.data() + elems, dev.v, static_cast<std::size_t>(elems) * 4);
    return r;
  });
  CHECK(cpu == gpu);
}

// fp8 kv_write: the bytes themselves, for values across E4M3's range (its
// subnormals, a scale's division, saturation past 448, both vector widths).
TEST_CASE("kv_write into an fp8 cache stores the cpu's bytes: scales, subnormals, saturation") {
  BackendPair be;
  for (std::int32_t head_dim : {8, 5}) {  // width 16: the 4-wide vector kernel; width 10: the scalar one
    INFO("head_dim " << head_dim);
    auto [cpu, gpu] = both(be, [&](Backend& b) {
      KvCacheView c;
      c.dtype = ElemType::f8e4m3;
      c.num_blocks = 4;
      c.block_size = 4;
      c.kv_heads = 2;
      c.head_dim = head_dim;
      c.k_scale = kFp8KScale;
      c.v_scale = 0.003f;
      Buffer kb = b.allocate(static_cast<std::size_t>(c.bytes_per_tensor()));
      Buffer vb = b.allocate(static_cast<std::size_t>(c.bytes_per_tensor()));
      c.k = kb.data();
      c.v = vb.data();
      const std::vector<std::uint8_t> zero(static_cast<std::size_t>(c.bytes_per_tensor()), 0);
      b.upload(c.k, zero.data(), zero.size());
      b.upload(c.v, zero.data(), zero.size());
      const std::int64_t width = c.slot_elems(), rows = 9;
      std::vector<float> k = random_floats(static_cast<std::size_t>(rows * width), 60, 900.0f);  // past 448 x 1.37
      std::vector<float> v = random_floats(static_cast<std::size_t>(rows * width), 61, 0.01f);   // subnormal at scale 1
      k[0] = 0.0f, k[1] = -0.0f, k[2] = 1e-30f;
      DeviceTensor kt = to_device(b, k, rows, width), vt = to_device(b, v, rows, width);
      b.kv_write(kt.view, vt.view, c, std::vector<std::int64_t>{0, 1, 2, -1, 5, 7, 15, 12, 9});
      Result r(zero.size() * 2);
      std::vector<std::uint8_t> bytes(zero.size() * 2);
      b.download(bytes.data(), c.k, zero.size());
      b.download(bytes.data() + zero.size(), c.v, zero.size());
      for (std::size_t i = 0; i < bytes.size(); ++i) r[i] = bytes[i];
      return r;
    });
    CHECK(cpu == gpu);
  }
}

TEST_CASE("moe_topk and moe_experts match the cpu (f32 and bf16 experts)") {
  BackendPair be;
  const std::int64_t T = 9, H = 32, I = 24, E = 4, K = 2;
  const auto logits = random_floats(T * E, 30, 3.0f), x = random_floats(T * H, 31);
  for (ElemType wd : {ElemType::f32, ElemType::bf16}) {
    auto [cpu, gpu] = both(be, [&](Backend& b) {
      DeviceTensor rl = to_device(b, logits, T, E), ids = zeros(b, T, K, ElemType::i32), wts = zeros(b, T, K);
      b.moe_topk(rl.view, static_cast<std::int32_t>(K), true, ids.view, wts.view);
      std::vector<DeviceTensor> gu, dn;
      std::vector<TensorView> guv, dnv;
      for (std::int64_t e = 0; e < E; ++e) {
        const auto g = random_floats(2 * I * H, 40 + static_cast<std::uint32_t>(e), 0.3f);
        const auto d = random_floats(H * I, 50 + static_cast<std::uint32_t>(e), 0.3f);
        if (wd == ElemType::bf16) {
          gu.push_back(to_device(b, to_bf16(g), ElemType::bf16, 2 * I, H));
          dn.push_back(to_device(b, to_bf16(d), ElemType::bf16, H, I));
        } else {
          gu.push_back(to_device(b, g, 2 * I, H));
          dn.push_back(to_device(b, d, H, I));
        }
        guv.push_back(gu.back().view);
        dnv.push_back(dn.back().view);
      }
      DeviceTensor xv = to_device(b, x, T, H), out = zeros(b, T, H);
      b.moe_experts(xv.view, ids.view, wts.view, ExpertWeights{guv, dnv, {}, {}}, out.view);
      const auto id_host = to_host<std::int32_t>(b, ids.view);
      Result r(id_host.begin(), id_host.end());
      const Result w = to_host(b, wts.view), o = to_host(b, out.view);
      r.insert(r.end(), w.begin(), w.end());
      r.insert(r.end(), o.begin(), o.end());
      return r;
    });
    INFO("experts " << elem_type_name(wd));
    // Ids exactly, weights to float rounding, outputs per the GEMM's dtype.
    const std::size_t n_ids = static_cast<std::size_t>(T * K);
    CHECK(Result(cpu.begin(), cpu.begin() + n_ids) == Result(gpu.begin(), gpu.begin() + n_ids));
    CHECK(max_abs_diff(gpu, cpu) < (wd == ElemType::f32 ? 1e-5 : 2e-2));
  }
}

TEST_CASE("sample gives the cpu's tokens: greedy, temperature, top-k, top-p") {
  BackendPair be;
  const std::int64_t V = 1000;
  const auto logits = random_floats(4 * V, 60, 5.0f);
  std::vector<SamplingParams> params(4);
  params[1].temperature = 0.8f;
  params[2].temperature = 1.2f;
  params[2].top_k = 20;
  params[3].temperature = 1.0f;
  params[3].top_p = 0.9f;
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].seed = 7;
    params[i].request = static_cast<RequestId>(i);
    params[i].token_index = 3;
  }
  std::vector<TokenId> a(4), g(4);
  DeviceTensor lc = to_device(*be.cpu, logits, 4, V), lg = to_device(*be.gpu, logits, 4, V);
  be.cpu->sample(lc.view, params, a);
  be.gpu->sample(lg.view, params, g);
  CHECK(a == g);
}

TEST_CASE("greedy rows take the cpu's argmax on the device: ties, NaN, -inf, a large vocabulary, mixed with sampled rows") {
  BackendPair be;
  const std::int64_t V = 128256;  // Llama 3's vocabulary: many strided passes per thread
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = random_floats(6 * V, 61, 5.0f);
  auto row = [&](std::int64_t r) { return logits.data() + r * V; };
  row(0)[77] = 50.0f;  // a tie: the lower id wins
  row(0)[90000] = 50.0f;
  row(1)[0] = nan;  // the host's scan never moves off id 0
  row(1)[5] = 99.0f;
  row(2)[3] = nan;  // NaN elsewhere is skipped
  row(2)[4] = 80.0f;
  std::fill(row(3), row(3) + V, -inf);  // nothing beats -inf: id 0
  row(4)[V - 1] = 70.0f;  // the last id
  std::vector<SamplingParams> params(6);
  params[4].temperature = 0.7f;  // top_k 1 is greedy whatever the temperature
  params[4].top_k = 1;
  params[5].temperature = 1.0f;  // sampled on the device, in the same call
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].seed = 3;
    params[i].request = static_cast<RequestId>(i);
  }
  std::vector<TokenId> a(6), g(6);
  DeviceTensor lc = to_device(*be.cpu, logits, 6, V), lg = to_device(*be.gpu, logits, 6, V);
  be.cpu->sample(lc.view, params, a);
  be.gpu->sample(lg.view, params, g);
  CHECK(a == g);
  CHECK(g[0] == 77);
  CHECK(g[1] == 0);
  CHECK(g[2] == 4);
  CHECK(g[3] == 0);
  CHECK(g[4] == V - 1);
}

TEST_CASE("sampled rows on the device give the cpu's tokens: many rows, cuts, ties, NaN, inf, several chunks") {
  BackendPair be;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Both backends on the same strided logits, over a few token indices.
  auto compare = [&](const std::vector<float>& logits, std::int64_t rows, std::int64_t V,
                     std::vector<SamplingParams> params) {
    Strided lc = strided(*be.cpu, logits, rows, V), lg = strided(*be.gpu, logits, rows, V);
    std::set<TokenId> seen;
    for (std::int64_t t = 0; t < 3; ++t) {
      for (SamplingParams& p : params) p.token_index = t;
      std::vector<TokenId> a(static_cast<std::size_t>(rows)), g(static_cast<std::size_t>(rows));
      be.cpu->sample(lc.view, params, a);
      be.gpu->sample(lg.view, params, g);
      CHECK(a == g);
      seen.insert(g.begin(), g.end());
    }
    return seen.size();
  };

  const std::int64_t V = 32000, rows = 64;
  std::vector<float> logits = random_floats(static_cast<std::size_t>(rows * V), 62, 4.0f);
  auto row = [&](std::int64_t r) { return logits.data() + r * V; };
  std::transform(row(3), row(4), row(3), [](float l) { return std::round(l * 2.0f) / 2.0f; });  // many ties
  for (std::int64_t i = 0; i < 4; ++i) row(4)[i * 7919] = 30.0f;  // a tied maximum
  row(5)[0] = nan;  // where the greedy scan stays
  for (std::int64_t i = 1; i < V; i += 97) row(5)[i] = nan;
  for (std::int64_t i = 0; i < V; i += 3) row(6)[i] = -inf;
  row(7)[123] = inf;  // +inf takes all the mass, shared by the +inf ids
  row(7)[31000] = inf;
  std::fill(row(8), row(9), nan);
  std::fill(row(9), row(10), -inf);
  for (std::int64_t i = 0; i < V; i += 2) row(10)[i] = nan;
  for (std::int64_t i = 1; i < V; i += 2) row(10)[i] = -inf;
  const float temperatures[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.3f, 5.0f};
  const float top_ps[] = {1.0f, 0.9f, 0.5f, 0.01f};
  const std::int32_t top_ks[] = {0, 5, 50, static_cast<std::int32_t>(V + 10)};
  std::vector<SamplingParams> params(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < params.size(); ++r) {
    params[r].temperature = temperatures[(r + 1) % 6];  // rows 5, 11, ... greedy (temperature 0)
    params[r].top_k = top_ks[(r / 3) % 4];
    params[r].top_p = top_ps[(r / 2) % 4];
    params[r].seed = 11;
    params[r].request = static_cast<RequestId>(r);
  }
  params[5].temperature = 0.9f;  // the NaN-at-0 row sampled, not greedy
  params[63].top_k = 1;           // greedy by top_k
  CHECK(compare(logits, rows, V, params) > 30);

  // Llama 3's vocabulary, more sampled rows than one sort chunk holds
  // (2^24 pairs / 128256 = 130 rows), greedy rows in between.
  const std::int64_t big_v = 128256, big_rows = 144;
  const std::vector<float> big = random_floats(static_cast<std::size_t>(big_rows * big_v), 63, 6.0f);
  std::vector<SamplingParams> big_params(static_cast<std::size_t>(big_rows));
  for (std::size_t r = 0; r < big_params.size(); ++r) {
    big_params[r].temperature = r % 17 == 0 ? 0.0f : 0.6f + 0.1f * static_cast<float>(r % 9);
    big_params[r].top_k = r % 3 == 0 ? 0 : 40;
    big_params[r].top_p = r % 4 == 0 ? 1.0f : 0.92f;
    big_params[r].seed = 12;
    big_params[r].request = static_cast<RequestId>(r);
  }
  CHECK(compare(big, big_rows, big_v, big_params) > 100);
}

}  // namespace twin::test
