// Paged attention against dense attention written out in the test.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <numeric>

#include "engine/backend/cpu/cpu_backend.hpp"
#include "tests/backend/backend_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

struct Geometry {
  std::int32_t heads, kv_heads, head_dim, block_size;
};

// Keys/values of one sequence, [ctx, kv_heads * head_dim], and its queries
// for the last num_query positions, [num_query, heads * head_dim].
struct SeqData {
  std::int32_t ctx, num_query;
  std::vector<float> k, v, q;
  std::vector<BlockId> table;
};

// Dense causal attention of the sequence's queries, in double.
std::vector<float> dense_attention(const SeqData& s, const Geometry& g, std::int32_t window = 0) {
  const std::int32_t group = g.heads / g.kv_heads, hd = g.head_dim;
  const std::int64_t kw = static_cast<std::int64_t>(g.kv_heads) * hd, qw = static_cast<std::int64_t>(g.heads) * hd;
  std::vector<float> out(static_cast<std::size_t>(s.num_query * qw));
  for (std::int32_t i = 0; i < s.num_query; ++i) {
    const std::int32_t pos = s.ctx - s.num_query + i;
    const std::int32_t lo = window > 0 ? std::max(0, pos - window + 1) : 0;
    for (std::int32_t h = 0; h < g.heads; ++h) {
      const std::int32_t kvh = h / group;
      std::vector<double> sc;
      for (std::int32_t p = lo; p <= pos; ++p) {
        double d = 0;
        for (std::int32_t x = 0; x < hd; ++x) d += static_cast<double>(s.q[i * qw + h * hd + x]) * s.k[p * kw + kvh * hd + x];
        sc.push_back(d / std::sqrt(static_cast<double>(hd)));
      }
      const double mx = *std::max_element(sc.begin(), sc.end());
      double total = 0;
      for (auto& e : sc) total += (e = std::exp(e - mx));
      for (std::int32_t x = 0; x < hd; ++x) {
        double o = 0;
        for (std::int32_t p = lo; p <= pos; ++p) o += sc[p - lo] / total * s.v[p * kw + kvh * hd + x];
        out[i * qw + h * hd + x] = static_cast<float>(o);
      }
    }
  }
  return out;
}

// A cache with a shuffled pool of blocks handed out to sequences in turn.
struct PagedSetup {
  Geometry g;
  std::int64_t num_blocks;
  DeviceTensor k_cache, v_cache;
  KvCacheView view;
  std::vector<BlockId> free_blocks;

  PagedSetup(Backend& be, const Geometry& geom, std::int64_t blocks, std::uint32_t seed,
             ElemType dtype = ElemType::f32)
      : g(geom), num_blocks(blocks) {
    const std::int64_t width = static_cast<std::int64_t>(g.kv_heads) * g.head_dim;
    k_cache = zeros(be, blocks * g.block_size, width, dtype);
    v_cache = zeros(be, blocks * g.block_size, width, dtype);
    view = {k_cache.view.data, v_cache.view.data, dtype, blocks, g.block_size, g.kv_heads, g.head_dim};
    free_blocks.resize(static_cast<std::size_t>(blocks));
    std::iota(free_blocks.begin(), free_blocks.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  }

  SeqData make_seq(std::int32_t ctx, std::int32_t num_query, std::uint32_t seed) {
    const std::int64_t kw = static_cast<std::int64_t>(g.kv_heads) * g.head_dim;
    SeqData s{ctx, num_query, random_floats(ctx * kw, seed), random_floats(ctx * kw, seed + 1),
              random_floats(static_cast<std::size_t>(num_query) * g.heads * g.head_dim, seed + 2), {}};
    for (std::int32_t b = 0; b < (ctx + g.block_size - 1) / g.block_size; ++b) {
      REQUIRE(!free_blocks.empty());
      s.table.push_back(free_blocks.back());
      free_blocks.pop_back();
    }
    return s;
  }

  std::vector<std::int64_t> slots(const SeqData& s, std::int32_t from, std::int32_t to) const {
    std::vector<std::int64_t> out;
    for (std::int32_t p = from; p < to; ++p)
      out.push_back(static_cast<std::int64_t>(s.table[p / g.block_size]) * g.block_size + p % g.block_size);
    return out;
  }

  // Writes positions [from, to) of the sequence's K/V through kv_write.
  void write(Backend& be, const SeqData& s, std::int32_t from, std::int32_t to) {
    const std::int64_t kw = static_cast<std::int64_t>(g.kv_heads) * g.head_dim;
    std::vector<float> k(s.k.begin() + from * kw, s.k.begin() + to * kw), v(s.v.begin() + from * kw, s.v.begin() + to * kw);
    auto dk = to_device(be, k, to - from, kw), dv = to_device(be, v, to - from, kw);
    be.kv_write(dk.view, dv.view, view, slots(s, from, to));
  }
};

// Runs one attention call over several sequences stacked in q; returns each
// sequence's output rows.
std::vector<std::vector<float>> run_batch(Backend& be, PagedSetup& ps, const std::vector<SeqData>& seqs,
                                          std::int32_t window = 0) {
  const std::int64_t qw = static_cast<std::int64_t>(ps.g.heads) * ps.g.head_dim;
  std::vector<float> q;
  std::vector<SeqAttention> meta;
  for (const auto& s : seqs) {
    meta.push_back({static_cast<std::int32_t>(q.size() / qw), s.num_query, s.ctx, s.table});
    q.insert(q.end(), s.q.begin(), s.q.end());
  }
  const auto rows = static_cast<std::int64_t>(q.size() / qw);
  auto dq = to_device(be, q, rows, qw);
  auto out = zeros(be, rows, qw);
  be.paged_attention(dq.view, ps.view, meta,
                     {.num_heads = ps.g.heads, .num_kv_heads = ps.g.kv_heads, .head_dim = ps.g.head_dim,
                      .sliding_window = window},
                     out.view);
  const auto all = to_host(be, out.view);
  std::vector<std::vector<float>> per_seq;
  for (const auto& m : meta)
    per_seq.emplace_back(all.begin() + m.query_start * qw, all.begin() + (m.query_start + m.num_query) * qw);
  return per_seq;
}

}  // namespace

TEST_CASE("paged attention equals dense attention: block sizes, GQA, mixed prefill and decode") {
  auto be = make_cpu_backend(2);
  for (Geometry g : {Geometry{4, 2, 16, 1}, Geometry{4, 4, 8, 16}, Geometry{6, 2, 32, 5}, Geometry{3, 1, 8, 7}}) {
    CAPTURE(g.heads, g.kv_heads, g.head_dim, g.block_size);
    PagedSetup ps(*be, g, 400, 21);
    // A prefill from scratch, a prefill chunk after context, decodes of different lengths.
    std::vector<SeqData> seqs{ps.make_seq(23, 23, 100), ps.make_seq(40, 9, 200), ps.make_seq(1, 1, 300),
                              ps.make_seq(57, 1, 400), ps.make_seq(16, 1, 500)};
    for (const auto& s : seqs) ps.write(*be, s, 0, s.ctx);
    const auto got = run_batch(*be, ps, seqs);
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      CAPTURE(i);
      CHECK(max_abs_diff(got[i], dense_attention(seqs[i], g)) < 1e-5);
    }
  }
}

TEST_CASE("chunked prefill gives the same bits as one-shot prefill") {
  auto be = make_cpu_backend(2);
  const Geometry g{4, 2, 16, 4};
  PagedSetup ps(*be, g, 64, 22);
  SeqData whole = ps.make_seq(37, 37, 600);
  ps.write(*be, whole, 0, whole.ctx);
  const auto one_shot = run_batch(*be, ps, {whole})[0];
  CHECK(max_abs_diff(one_shot, dense_attention(whole, g)) < 1e-5);

  const std::int64_t qw = static_cast<std::int64_t>(g.heads) * g.head_dim;
  std::vector<float> chunked;
  for (auto [from, to] : {std::pair{0, 10}, {10, 25}, {25, 36}, {36, 37}}) {
    SeqData chunk = whole;
    chunk.ctx = to;
    chunk.num_query = to - from;
    chunk.q.assign(whole.q.begin() + from * qw, whole.q.begin() + to * qw);
    const auto part = run_batch(*be, ps, {chunk})[0];
    chunked.insert(chunked.end(), part.begin(), part.end());
  }
  CHECK(chunked == one_shot);
}

TEST_CASE("a sequence's attention output does not depend on the other sequences in the batch") {
  auto be = make_cpu_backend(2);
  const Geometry g{4, 1, 16, 16};
  PagedSetup ps(*be, g, 64, 23);
  std::vector<SeqData> seqs{ps.make_seq(70, 1, 700), ps.make_seq(33, 12, 800), ps.make_seq(5, 1, 900)};
  for (const auto& s : seqs) ps.write(*be, s, 0, s.ctx);
  const auto batched = run_batch(*be, ps, seqs);
  for (std::size_t i = 0; i < seqs.size(); ++i) CHECK(run_batch(*be, ps, {seqs[i]})[0] == batched[i]);
}

TEST_CASE("sliding-window attention sees only the last window keys") {
  auto be = make_cpu_backend(2);
  const Geometry g{2, 1, 8, 3};
  PagedSetup ps(*be, g, 64, 24);
  std::vector<SeqData> seqs{ps.make_seq(30, 30, 1000), ps.make_seq(12, 1, 1100)};
  for (const auto& s : seqs) ps.write(*be, s, 0, s.ctx);
  const auto got = run_batch(*be, ps, seqs, 5);
  CHECK(max_abs_diff(got[0], dense_attention(seqs[0], g, 5)) < 1e-5);
  CHECK(max_abs_diff(got[1], dense_attention(seqs[1], g, 5)) < 1e-5);
}

TEST_CASE("kv_write skips negative slots, and copy_blocks swaps blocks out to a host cache and back") {
  auto be = make_cpu_backend(2);
  const Geometry g{2, 2, 4, 2};
  PagedSetup ps(*be, g, 6, 25);
  const std::int64_t width = 8;
  const auto k = random_floats(3 * width, 30), v = random_floats(3 * width, 31);
  auto dk = to_device(*be, k, 3, width), dv = to_device(*be, v, 3, width);
  const std::vector<std::int64_t> slots{5, -1, 0};
  be->kv_write(dk.view, dv.view, ps.view, slots);
  const auto kc = to_host(*be, ps.k_cache.view);
  CHECK(std::vector<float>(kc.begin() + 5 * width, kc.begin() + 6 * width) == std::vector<float>(k.begin(), k.begin() + width));
  CHECK(std::vector<float>(kc.begin(), kc.begin() + width) == std::vector<float>(k.begin() + 2 * width, k.end()));
  CHECK(std::count(kc.begin(), kc.end(), 0.0f) == static_cast<long>(kc.size() - 2 * width));

  // Swap blocks 2 and 0 out to a 3-block host cache, clobber them, swap back in.
  const std::size_t bytes = 3 * 2 * width * sizeof(float);
  Buffer hk = be->allocate(bytes, MemoryKind::host), hv = be->allocate(bytes, MemoryKind::host);
  const KvCacheView host{hk.data(), hv.data(), ElemType::f32, 3, 2, 2, 4};
  const auto before_k = to_host(*be, ps.k_cache.view), before_v = to_host(*be, ps.v_cache.view);
  const std::vector<BlockCopy> out_pairs{{2, 0}, {0, 2}};
  be->copy_blocks(ps.view, host, out_pairs);
  be->fill(ps.k_cache.view, -1.0f);
  be->fill(ps.v_cache.view, -1.0f);
  const std::vector<BlockCopy> in_pairs{{0, 2}, {2, 0}};
  be->copy_blocks(host, ps.view, in_pairs);
  const auto after_k = to_host(*be, ps.k_cache.view), after_v = to_host(*be, ps.v_cache.view);
  for (std::int64_t b : {0, 2}) {
    const auto span = 2 * width;
    CHECK(std::equal(after_k.begin() + b * span, after_k.begin() + (b + 1) * span, before_k.begin() + b * span));
    CHECK(std::equal(after_v.begin() + b * span, after_v.begin() + (b + 1) * span, before_v.begin() + b * span));
  }
  const std::vector<BlockCopy> bad{{0, 3}};
  CHECK_THROWS_AS(be->copy_blocks(ps.view, host, bad), Error);
}

TEST_CASE("a bf16 KV cache gives exactly the f32 cache's results over bf16-rounded keys and values") {
  auto be = make_cpu_backend(2);
  for (Geometry g : {Geometry{4, 2, 16, 1}, Geometry{6, 2, 32, 5}, Geometry{8, 8, 8, 16}}) {
    for (std::int32_t window : {0, 6}) {
      CAPTURE(g.heads, g.kv_heads, g.head_dim, g.block_size, window);
      PagedSetup half(*be, g, 200, 5, ElemType::bf16), full(*be, g, 200, 5);
      std::vector<SeqData> seqs{half.make_seq(23, 23, 10), half.make_seq(40, 9, 20), half.make_seq(31, 1, 30)};
      std::vector<SeqData> rounded = seqs;
      for (SeqData& s : rounded) {
        s.k = bf16_round(s.k);
        s.v = bf16_round(s.v);
      }
      // Same block tables on both caches: the shuffles share a seed.
      for (const auto& s : seqs) REQUIRE(full.make_seq(s.ctx, s.num_query, 0).table == s.table);
      for (std::size_t i = 0; i < seqs.size(); ++i) {
        half.write(*be, seqs[i], 0, seqs[i].ctx);
        full.write(*be, rounded[i], 0, rounded[i].ctx);
      }
      const auto got = run_batch(*be, half, seqs, window);
      const auto want = run_batch(*be, full, rounded, window);
      for (std::size_t i = 0; i < seqs.size(); ++i) CHECK(got[i] == want[i]);
      // And within bf16 rounding of attention over the exact values.
      for (std::size_t i = 0; i < seqs.size(); ++i) CHECK(max_abs_diff(got[i], dense_attention(seqs[i], g, window)) < 2e-2);
    }
  }
}

TEST_CASE("an fp8 KV cache with per-tensor scales gives exactly the f32 cache's results over fp8-rounded K and V") {
  auto be = make_cpu_backend(2);
  // Scales that are not powers of two, so the division really rounds; V
  // below fp8's normal range at scale 1 (|v| < 2^-6 would be subnormal).
  const float k_scale = 1.37f, v_scale = 0.00213f;
  for (Geometry g : {Geometry{4, 2, 16, 1}, Geometry{6, 2, 32, 5}, Geometry{8, 8, 8, 16}}) {
    for (std::int32_t window : {0, 6}) {
      CAPTURE(g.heads, g.kv_heads, g.head_dim, g.block_size, window);
      PagedSetup eight(*be, g, 200, 5, ElemType::f8e4m3), full(*be, g, 200, 5);
      eight.view.k_scale = k_scale;
      eight.view.v_scale = v_scale;
      std::vector<SeqData> seqs{eight.make_seq(23, 23, 10), eight.make_seq(40, 9, 20), eight.make_seq(31, 1, 30)};
      for (SeqData& s : seqs) {
        for (float& x : s.v) x *= 0.01f;
      }
      std::vector<SeqData> rounded = seqs;
      for (SeqData& s : rounded) {
        s.k = fp8_round(s.k, k_scale);
        s.v = fp8_round(s.v, v_scale);
      }
      for (const auto& s : seqs) REQUIRE(full.make_seq(s.ctx, s.num_query, 0).table == s.table);
      for (std::size_t i = 0; i < seqs.size(); ++i) {
        eight.write(*be, seqs[i], 0, seqs[i].ctx);
        full.write(*be, rounded[i], 0, rounded[i].ctx);
      }
      const auto got = run_batch(*be, eight, seqs, window);
      const auto want = run_batch(*be, full, rounded, window);
      for (std::size_t i = 0; i < seqs.size(); ++i) CHECK(got[i] == want[i]);
      // fp8 keeps 3 mantissa bits (relative error up to 1/16) and the
      // scales keep V's values normal: within 1/16 of |v| <= 0.01 plus the
      // scores' own rounding, of attention over the exact values.
      for (std::size_t i = 0; i < seqs.size(); ++i) {
        CAPTURE(max_abs_diff(got[i], dense_attention(seqs[i], g, window)));
        CHECK(max_abs_diff(got[i], dense_attention(seqs[i], g, window)) < 1e-3f);
      }
    }
  }
}

TEST_CASE("KV cache scales: positive and finite, and only for an fp8 cache") {
  auto be = make_cpu_backend(1);
  const Geometry g{2, 1, 8, 4};
  PagedSetup ps(*be, g, 8, 1, ElemType::bf16);
  const SeqData s = ps.make_seq(4, 4, 1);
  ps.view.k_scale = 2.0f;
  CHECK_THROWS_WITH(ps.write(*be, s, 0, 4), Catch::Contains("scales other than 1") && Catch::Contains("bf16"));
  PagedSetup f8(*be, g, 8, 1, ElemType::f8e4m3);
  f8.view.v_scale = 0.0f;
  CHECK_THROWS_WITH(f8.write(*be, s, 0, 4), Catch::Contains("finite and positive"));
  f8.view.v_scale = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(f8.write(*be, s, 0, 4), Catch::Contains("finite and positive"));
}

TEST_CASE("the cpu backend refuses a KV cache dtype it does not store") {
  auto be = make_cpu_backend(1);
  const Geometry g{2, 1, 8, 4};
  PagedSetup ps(*be, g, 8, 1, ElemType::f16);
  const SeqData s = ps.make_seq(4, 4, 1);
  CHECK_THROWS_WITH(ps.write(*be, s, 0, 4), Catch::Contains("f32, bf16 or fp8_e4m3") && Catch::Contains("f16"));
}
