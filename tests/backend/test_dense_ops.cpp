// Dense ops against straightforward loop implementations.
#include <catch2/catch.hpp>

#include "engine/backend/cpu/cpu_backend.hpp"
#include "engine/backend/rope.hpp"
#include "tests/backend/backend_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

// C[m,n] = A[m,k] W[n,k]^T + bias, in double.
std::vector<float> naive_gemm(const std::vector<float>& a, const std::vector<float>& w, std::int64_t m,
                              std::int64_t n, std::int64_t k, const std::vector<float>* bias = nullptr,
                              const std::vector<float>* c0 = nullptr) {
  std::vector<float> c(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = c0 ? (*c0)[i * n + j] : 0.0;
      for (std::int64_t x = 0; x < k; ++x) s += static_cast<double>(a[i * k + x]) * w[j * k + x];
      if (bias) s += (*bias)[j];
      c[i * n + j] = static_cast<float>(s);
    }
  }
  return c;
}

}  // namespace

TEST_CASE("gemm f32 matches the loop reference, with bias and accumulate") {
  auto be = make_cpu_backend(2);
  for (auto [m, n, k] : {std::tuple{1, 33, 64}, {3, 5, 7}, {17, 40, 96}, {64, 48, 33}}) {
    CAPTURE(m, n, k);
    const auto a = random_floats(m * k, 1), w = random_floats(n * k, 2), bias = random_floats(n, 3);
    const auto c0 = random_floats(m * n, 4);
    auto da = to_device(*be, a, m, k), dw = to_device(*be, w, n, k), db = to_device(*be, bias, 1, n);
    auto dc = to_device(*be, c0, m, n);
    be->gemm(da.view, dw.view, dc.view);
    CHECK(max_abs_diff(to_host(*be, dc.view), naive_gemm(a, w, m, n, k)) < 1e-4);

    be->upload(dc.view.data, c0.data(), c0.size() * 4);
    be->gemm(da.view, dw.view, dc.view, {.bias = &db.view, .accumulate = true});
    CHECK(max_abs_diff(to_host(*be, dc.view), naive_gemm(a, w, m, n, k, &bias, &c0)) < 1e-4);
  }
}

TEST_CASE("gemm on few rows (the direct kernel) matches the loop reference at every row count and edge") {
  auto be = make_cpu_backend(2);
  // n = 300: tiles of 128 + 44 columns, so blocks of 8, 4 and single W rows;
  // k = 101: 12 lanes of 8 and a tail of 5.
  const std::int64_t n = 300, k = 101;
  const auto w = random_floats(n * k, 21);
  const auto bias = random_floats(n, 22);
  auto dw = to_device(*be, w, n, k), db = to_device(*be, bias, 1, n);
  for (std::int64_t m = 1; m <= kGemmDirectMaxRows + 1; ++m) {
    CAPTURE(m);
    const auto a = random_floats(m * k, 23), c0 = random_floats(m * n, 24);
    auto da = to_device(*be, a, m, k), dc = zeros(*be, m, n);
    be->gemm(da.view, dw.view, dc.view);
    CHECK(max_abs_diff(to_host(*be, dc.view), naive_gemm(a, w, m, n, k)) < 1e-4);
    auto dacc = to_device(*be, c0, m, n);
    be->gemm(da.view, dw.view, dacc.view, {.bias = &db.view, .accumulate = true});
    CHECK(max_abs_diff(to_host(*be, dacc.view), naive_gemm(a, w, m, n, k, &bias, &c0)) < 1e-4);
  }
}

TEST_CASE("a decode row's GEMM result does not depend on the other rows in its batch") {
  // Up to kGemmDirectMaxRows rows every C element is summed in one fixed
  // order, so a sequence decodes to the same bits alone or batched.
  auto be = make_cpu_backend(2);
  const std::int64_t n = 200, k = 77;
  const auto w = random_floats(n * k, 31);
  auto dw = to_device(*be, w, n, k), dwb = to_device(*be, to_bf16(w), ElemType::bf16, n, k);
  const auto a = random_floats(kGemmDirectMaxRows * k, 32);
  for (const auto* weights : {&dw.view, &dwb.view}) {
    std::vector<std::vector<float>> alone;
    for (std::int64_t r = 0; r < kGemmDirectMaxRows; ++r) {
      auto da = to_device(*be, std::vector<float>(a.begin() + r * k, a.begin() + (r + 1) * k), 1, k);
      auto dc = zeros(*be, 1, n);
      be->gemm(da.view, *weights, dc.view);
      alone.push_back(to_host(*be, dc.view));
    }
    for (std::int64_t m = 2; m <= kGemmDirectMaxRows; ++m) {
      CAPTURE(m, weights->dtype == ElemType::bf16);
      auto da = to_device(*be, std::vector<float>(a.begin(), a.begin() + m * k), m, k);
      auto dc = zeros(*be, m, n);
      be->gemm(da.view, *weights, dc.view);
      const auto got = to_host(*be, dc.view);
      for (std::int64_t r = 0; r < m; ++r) {
        CAPTURE(r);
        CHECK(std::vector<float>(got.begin() + r * n, got.begin() + (r + 1) * n) == alone[static_cast<std::size_t>(r)]);
      }
    }
  }
}

TEST_CASE("gemm reads a column slice of A (strided rows) and writes into a column slice of C") {
  auto be = make_cpu_backend(2);
  const std::int64_t m = 5, k = 16, n = 9;
  const auto wide = random_floats(m * 3 * k, 5), w = random_floats(n * k, 6);
  auto da = to_device(*be, wide, m, 3 * k);
  auto dw = to_device(*be, w, n, k);
  auto dc = zeros(*be, m, 2 * n);
  be->gemm(da.view.slice_cols(k, k), dw.view, dc.view.slice_cols(n, n));
  std::vector<float> a(m * k);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t x = 0; x < k; ++x) a[i * k + x] = wide[i * 3 * k + k + x];
  const auto want = naive_gemm(a, w, m, n, k);
  const auto got = to_host(*be, dc.view.slice_cols(n, n));
  CHECK(max_abs_diff(got, want) < 1e-4);
  const auto left = to_host(*be, dc.view.slice_cols(0, n));
  CHECK(max_abs_diff(left, std::vector<float>(m * n, 0.0f)) == 0.0);  // untouched
}

TEST_CASE("gemm with bf16 weights equals f32 on the rounded weights, on both the direct and the panel path") {
  auto be = make_cpu_backend(2);
  const std::int64_t n = 300, k = 1000;  // several panels of 262 rows
  const auto w = random_floats(n * k, 7, 0.1f);
  const auto w_rounded = bf16_round(w);
  auto dw = to_device(*be, to_bf16(w), ElemType::bf16, n, k);
  const auto bias = random_floats(n, 9);
  auto db = to_device(*be, to_bf16(bias), ElemType::bf16, 1, n);
  const auto bias_rounded = bf16_round(bias);
  for (std::int64_t m : {std::int64_t{1}, std::int64_t{4}, kGemmDirectMaxRows, kGemmDirectMaxRows + 1, std::int64_t{40}}) {
    CAPTURE(m);
    const auto a = random_floats(m * k, 8);
    auto da = to_device(*be, a, m, k);
    auto dc = zeros(*be, m, n);
    be->gemm(da.view, dw.view, dc.view, {.bias = &db.view});
    const auto got = to_host(*be, dc.view);
    CHECK(max_abs_diff(got, naive_gemm(a, w_rounded, m, n, k, &bias_rounded)) < 1e-4);
    // and close to the unrounded f32 weights (bf16 keeps 8 bits of mantissa)
    CHECK(max_abs_diff(got, naive_gemm(a, w, m, n, k, &bias)) < 0.05);
  }
}

TEST_CASE("embedding gathers rows from f32 and bf16 tables") {
  auto be = make_cpu_backend(2);
  const std::int64_t vocab = 50, dim = 12;
  const auto table = random_floats(vocab * dim, 10);
  const std::vector<TokenId> ids{3, 0, 49, 3, 17};
  auto df = to_device(*be, table, vocab, dim);
  auto db = to_device(*be, to_bf16(table), ElemType::bf16, vocab, dim);
  const auto rounded = bf16_round(table);
  for (bool bf16 : {false, true}) {
    auto out = zeros(*be, static_cast<std::int64_t>(ids.size()), dim);
    be->embedding(ids, bf16 ? db.view : df.view, out.view);
    const auto got = to_host(*be, out.view);
    for (std::size_t i = 0; i < ids.size(); ++i)
      for (std::int64_t c = 0; c < dim; ++c) CHECK(got[i * dim + c] == (bf16 ? rounded : table)[ids[i] * dim + c]);
  }
  auto out = zeros(*be, 1, dim);
  const std::vector<TokenId> bad{50};
  CHECK_THROWS_AS(be->embedding(bad, df.view, out.view), Error);
}

TEST_CASE("rmsnorm and the fused residual add match the loop reference") {
  auto be = make_cpu_backend(2);
  const std::int64_t rows = 7, cols = 37;
  const float eps = 1e-5f;
  const auto x = random_floats(rows * cols, 11), delta = random_floats(rows * cols, 12);
  const auto w = random_floats(cols, 13);
  auto reference = [&](const std::vector<float>& in) {
    std::vector<float> out(in.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (std::int64_t c = 0; c < cols; ++c) ss += static_cast<double>(in[r * cols + c]) * in[r * cols + c];
      const double inv = 1.0 / std::sqrt(ss / cols + eps);
      for (std::int64_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>(in[r * cols + c] * inv * w[c]);
    }
    return out;
  };
  auto dx = to_device(*be, x, rows, cols), dd = to_device(*be, delta, rows, cols), dw = to_device(*be, w, 1, cols);
  auto out = zeros(*be, rows, cols);
  be->rmsnorm(dx.view, dw.view, eps, out.view);
  CHECK(max_abs_diff(to_host(*be, out.view), reference(x)) < 1e-5);

  std::vector<float> sum(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + delta[i];
  be->add_rmsnorm(dx.view, dd.view, dw.view, eps, out.view);
  CHECK(to_host(*be, dx.view) == sum);  // the residual stream now holds x + delta
  CHECK(max_abs_diff(to_host(*be, out.view), reference(sum)) < 1e-5);
}

TEST_CASE("rotary embedding rotates each head's halves by position, full and partial") {
  auto be = make_cpu_backend(2);
  const std::int32_t hd = 16, heads = 3, kv_heads = 1;
  const std::vector<std::int32_t> pos{0, 1, 7, 1000};
  const auto t = static_cast<std::int64_t>(pos.size());
  for (std::int32_t rot : {0, 8}) {
    CAPTURE(rot);
    const auto q = random_floats(t * heads * hd, 14), k = random_floats(t * kv_heads * hd, 15);
    auto dq = to_device(*be, q, t, heads * hd), dk = to_device(*be, k, t, kv_heads * hd);
    be->rotary(dq.view, dk.view, pos, {.head_dim = hd, .rotary_dim = rot, .theta = 10000.0f});
    const std::int32_t rd = rot == 0 ? hd : rot, half = rd / 2;
    auto reference = [&](std::vector<float> x, std::int32_t nh) {
      for (std::int64_t i = 0; i < t; ++i)
        for (std::int32_t h = 0; h < nh; ++h) {
          float* v = x.data() + (i * nh + h) * hd;
          for (std::int32_t j = 0; j < half; ++j) {
            const double ang = pos[i] * std::pow(10000.0, -2.0 * j / rd);
            const double a = v[j], b = v[j + half];
            v[j] = static_cast<float>(a * std::cos(ang) - b * std::sin(ang));
            v[j + half] = static_cast<float>(b * std::cos(ang) + a * std::sin(ang));
          }
        }
      return x;
    };
    CHECK(max_abs_diff(to_host(*be, dq.view), reference(q, heads)) < 1e-5);
    CHECK(max_abs_diff(to_host(*be, dk.view), reference(k, kv_heads)) < 1e-5);
  }
}

// Llama 3.1's rope_scaling (theta 500000, rotary dim 128, factor 8, low 1,
// high 4, original 8192). Expected values were computed independently from
// the published formula (Python, double precision).
TEST_CASE("rope frequencies: none, linear and llama3 scaling") {
  RopeConfig r{.head_dim = 128, .rotary_dim = 0, .theta = 500000.0f};
  const std::vector<double> plain = rope_inv_freq(r);
  REQUIRE(plain.size() == 64);
  CHECK(plain[0] == 1.0);
  CHECK(plain[20] == Approx(0.016560440080994446).epsilon(1e-14));
  r.scaling = RopeScaling::linear;
  r.factor = 4.0;
  const std::vector<double> linear = rope_inv_freq(r);
  for (std::size_t i = 0; i < plain.size(); ++i) CHECK(linear[i] == Approx(plain[i] / 4.0).epsilon(1e-14));
  r.scaling = RopeScaling::llama3;
  r.factor = 8.0;
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.original_max_position = 8192;
  const std::vector<double> l3 = rope_inv_freq(r);
  // Short wavelengths (under 8192 / 4 positions) keep their frequency.
  CHECK(l3[0] == plain[0]);
  CHECK(l3[28] == plain[28]);
  // The blend between 2048 and 8192 positions.
  CHECK(l3[29] == Approx(0.002166570763503359).epsilon(1e-12));
  CHECK(l3[30] == Approx(0.0013718935677611381).epsilon(1e-12));
  CHECK(l3[34] == Approx(0.0001785078127679964).epsilon(1e-12));
  // Long wavelengths (over 8192) are stretched by the factor.
  CHECK(l3[35] == Approx(plain[35] / 8.0).epsilon(1e-14));
  CHECK(l3[63] == Approx(3.068925988914511e-07).epsilon(1e-12));
}

TEST_CASE("rotary with linear scaling rotates position p as the plain rotation rotates p / factor") {
  auto be = make_cpu_backend(1);
  const std::int32_t hd = 16;
  const auto q = random_floats(2 * hd, 21), k = random_floats(2 * hd, 22);
  auto q1 = to_device(*be, q, 2, hd), k1 = to_device(*be, k, 2, hd);
  auto q2 = to_device(*be, q, 2, hd), k2 = to_device(*be, k, 2, hd);
  RopeConfig scaled{.head_dim = hd, .rotary_dim = 0, .theta = 10000.0f};
  scaled.scaling = RopeScaling::linear;
  scaled.factor = 4.0;
  be->rotary(q1.view, k1.view, std::vector<std::int32_t>{40, 1000}, scaled);
  be->rotary(q2.view, k2.view, std::vector<std::int32_t>{10, 250}, {.head_dim = hd, .rotary_dim = 0, .theta = 10000.0f});
  CHECK(max_abs_diff(to_host(*be, q1.view), to_host(*be, q2.view)) < 1e-5);
  CHECK(max_abs_diff(to_host(*be, k1.view), to_host(*be, k2.view)) < 1e-5);
  // Bad scaling parameters are refused before anything is rotated.
  scaled.factor = 0.0;
  CHECK_THROWS_WITH(be->rotary(q1.view, k1.view, std::vector<std::int32_t>{1, 2}, scaled),
                    Catch::Contains("scaling factor"));
  scaled.scaling = RopeScaling::llama3;
  scaled.factor = 8.0;
  scaled.low_freq_factor = 4.0;
  scaled.high_freq_factor = 1.0;
  CHECK_THROWS_WITH(be->rotary(q1.view, k1.view, std::vector<std::int32_t>{1, 2}, scaled),
                    Catch::Contains("low_freq_factor < high_freq_factor"));
}

TEST_CASE("silu_and_mul, add, copy with dtype conversion, fill and gather_rows") {
  auto be = make_cpu_backend(2);
  const std::int64_t rows = 4, inter = 10;
  const auto gu = random_floats(rows * 2 * inter, 16, 4.0f);
  auto dgu = to_device(*be, gu, rows, 2 * inter);
  auto out = zeros(*be, rows, inter);
  be->silu_and_mul(dgu.view, out.view);
  const auto got = to_host(*be, out.view);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < inter; ++c) {
      const double g = gu[r * 2 * inter + c], u = gu[r * 2 * inter + inter + c];
      CHECK(got[r * inter + c] == Approx(g / (1 + std::exp(-g)) * u).margin(1e-5));
    }

  auto sum = to_device(*be, std::vector<float>(rows * inter, 1.0f), rows, inter);
  be->add(sum.view, out.view);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(to_host(*be, sum.view)[i] == got[i] + 1.0f);

  auto b16 = zeros(*be, rows, inter, ElemType::bf16);
  auto back = zeros(*be, rows, inter);
  be->copy(out.view, b16.view);
  be->copy(b16.view, back.view);
  CHECK(max_abs_diff(to_host(*be, back.view), bf16_round(got)) == 0.0);

  be->fill(back.view, 2.5f);
  CHECK(to_host(*be, back.view) == std::vector<float>(rows * inter, 2.5f));

  auto picked = zeros(*be, 2, inter);
  const std::vector<std::int32_t> which{3, 1};
  be->gather_rows(out.view, which, picked.view);
  const auto p = to_host(*be, picked.view);
  CHECK(std::vector<float>(p.begin(), p.begin() + inter) == std::vector<float>(got.begin() + 3 * inter, got.begin() + 4 * inter));
}

TEST_CASE("dtype conversions round to nearest even and keep special values") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_f32(f32_to_bf16(1.00390625f)) == 1.0f);     // halfway, ties to even (down)
  CHECK(bf16_to_f32(f32_to_bf16(1.01171875f)) == 1.015625f);  // halfway, ties to even (up)
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  for (float v : {0.0f, -2.0f, 1.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, -0.333251953125f}) {
    CAPTURE(v);
    CHECK(f16_to_f32(f32_to_f16(v)) == v);  // exactly representable in f16
  }
  CHECK(std::isinf(f16_to_f32(f32_to_f16(70000.0f))));
  CHECK(f16_to_f32(f32_to_f16(1.0f + 1.0f / 4096)) == 1.0f);  // below half an ulp
  CHECK(parse_elem_type("bfloat16") == ElemType::bf16);
  CHECK_THROWS_AS(parse_elem_type("int8"), UsageError);
}
