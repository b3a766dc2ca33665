// FP8 E4M3 conversions (engine/backend/dtype.hpp): every code, rounding at
// every midpoint, saturation, subnormals and NaN; and the W8A8 fp8 GEMM
// against the product of its scaled operands.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "engine/backend/cpu/cpu_backend.hpp"
#include "engine/backend/dtype.hpp"
#include "engine/backend/fp8_rows.hpp"
#include "tests/backend/backend_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

bool is_nan_code(std::uint8_t b) { return (b & 0x7fu) == 0x7fu; }

}  // namespace

TEST_CASE("fp8 e4m3: known values, and every finite code converts back to itself") {
  CHECK(fp8e4m3_to_f32(0x38) == 1.0f);
  CHECK(fp8e4m3_to_f32(0x30) == 0.5f);
  CHECK(fp8e4m3_to_f32(0x7e) == 448.0f);
  CHECK(fp8e4m3_to_f32(0xfe) == -448.0f);
  CHECK(fp8e4m3_to_f32(0x08) == std::ldexp(1.0f, -6));  // smallest normal
  CHECK(fp8e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
  CHECK(fp8e4m3_to_f32(0x07) == 7.0f * std::ldexp(1.0f, -9));
  CHECK(std::isnan(fp8e4m3_to_f32(0x7f)));
  CHECK(std::isnan(fp8e4m3_to_f32(0xff)));
  CHECK(std::signbit(fp8e4m3_to_f32(0x80)));
  for (int b = 0; b < 256; ++b) {
    const auto code = static_cast<std::uint8_t>(b);
    if (is_nan_code(code)) continue;
    CAPTURE(b);
    CHECK(f32_to_fp8e4m3(fp8e4m3_to_f32(code)) == code);
  }
}

TEST_CASE("fp8 e4m3: round to nearest even at every midpoint, saturate, NaN stays NaN") {
  // Consecutive positive finite codes: below a midpoint to the lower, above to
  // the upper, at it to the even mantissa.
  for (int b = 0; b < 0x7e; ++b) {
    const float lo = fp8e4m3_to_f32(static_cast<std::uint8_t>(b)), hi = fp8e4m3_to_f32(static_cast<std::uint8_t>(b + 1));
    const float mid = (lo + hi) / 2;  // exact in f32
    CAPTURE(b, lo, hi);
    CHECK(f32_to_fp8e4m3(std::nextafter(mid, 0.0f)) == b);
    CHECK(f32_to_fp8e4m3(std::nextafter(mid, 1000.0f)) == b + 1);
    CHECK(f32_to_fp8e4m3(mid) == ((b & 1) == 0 ? b : b + 1));
    CHECK(f32_to_fp8e4m3(-mid) == (0x80 | ((b & 1) == 0 ? b : b + 1)));
  }
  CHECK(f32_to_fp8e4m3(449.0f) == 0x7e);
  CHECK(f32_to_fp8e4m3(1e30f) == 0x7e);
  CHECK(f32_to_fp8e4m3(-1e30f) == 0xfe);
  CHECK(f32_to_fp8e4m3(std::numeric_limits<float>::infinity()) == 0x7e);
  CHECK(f32_to_fp8e4m3(-std::numeric_limits<float>::infinity()) == 0xfe);
  CHECK(is_nan_code(f32_to_fp8e4m3(std::numeric_limits<float>::quiet_NaN())));
  CHECK(f32_to_fp8e4m3(std::ldexp(1.0f, -10)) == 0x00);  // half the smallest subnormal: ties to 0
  CHECK(f32_to_fp8e4m3(std::ldexp(1.01f, -10)) == 0x01);
  CHECK(f32_to_fp8e4m3(1e-30f) == 0x00);
  CHECK(f32_to_fp8e4m3(-1e-30f) == 0x80);
  CHECK(f32_to_fp8e4m3(std::numeric_limits<float>::denorm_min()) == 0x00);
}

TEST_CASE("fp8 e4m3: convert_to_f32 and convert_from_f32 move whole rows, unscaled") {
  const std::vector<float> in{0.0f, 1.0f, -2.5f, 300.0f, 1000.0f, 0.001f};
  std::vector<std::uint8_t> q(in.size());
  convert_from_f32(in.data(), q.data(), ElemType::f8e4m3, in.size());
  std::vector<float> back(in.size());
  convert_to_f32(q.data(), ElemType::f8e4m3, back.data(), in.size());
  const std::vector<float> want{0.0f, 1.0f, -2.5f, 288.0f, 448.0f, fp8e4m3_to_f32(f32_to_fp8e4m3(0.001f))};
  CHECK(back == want);
  CHECK(elem_bytes(ElemType::f8e4m3) == 1);
  CHECK(parse_elem_type("fp8_e4m3") == ElemType::f8e4m3);
  CHECK(parse_elem_type("fp8") == ElemType::f8e4m3);
}

namespace {

// Rows of v [rows, cols] scaled into E4M3 as the backends do it
// (engine/backend/fp8_rows.hpp): the bytes, each row's scale, and the
// unscaled values widened back to f32.
struct Fp8Rows {
  std::vector<std::uint8_t> q;
  std::vector<float> scales, values;
};

Fp8Rows fp8_rows(const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  Fp8Rows out{std::vector<std::uint8_t>(v.size()), std::vector<float>(static_cast<std::size_t>(rows)),
              std::vector<float>(v.size())};
  for (std::int64_t r = 0; r < rows; ++r) {
    out.scales[r] = fp8_row_scale(v.data() + r * cols, cols);
    quantize_row_fp8(v.data() + r * cols, cols, out.scales[r], out.q.data() + r * cols);
  }
  for (std::size_t i = 0; i < v.size(); ++i) out.values[i] = fp8e4m3_to_f32(out.q[i]);
  return out;
}

}  // namespace

TEST_CASE("fp8 W8A8 gemm equals the product of the scaled E4M3 operands, with accumulate and bias", "[fp8]") {
  auto be = make_cpu_backend(2);
  // 1-8 rows take the direct f32 kernel inside, 9 and 40 SGEMM; a zero row of A takes scale 1.
  for (auto [m, n, k] : {std::tuple{1, 37, 64}, {5, 130, 48}, {8, 33, 128}, {9, 130, 80}, {40, 48, 96}}) {
    CAPTURE(m, n, k);
    std::vector<float> a = random_floats(static_cast<std::size_t>(m * k), 11, 3.0f);
    for (std::int64_t x = 0; x < k; ++x) a[static_cast<std::size_t>(x)] = 0.0f;  // row 0: all zero
    const std::vector<float> w = random_floats(static_cast<std::size_t>(n * k), 12, 0.1f);
    const std::vector<float> c0 = random_floats(static_cast<std::size_t>(m * n), 13);
    const std::vector<float> bias = random_floats(static_cast<std::size_t>(n), 14);
    const Fp8Rows qa = fp8_rows(a, m, k), qw = fp8_rows(w, n, k);
    auto da = to_device(*be, a, m, k);
    auto dw = to_device(*be, qw.q, ElemType::f8e4m3, n, k);
    auto ds = to_device(*be, qw.scales, 1, n);
    auto db = to_device(*be, bias, 1, n);
    auto dc = to_device(*be, c0, m, n);
    GemmOptions o;
    o.w_scales = &ds.view;
    o.accumulate = true;
    o.bias = &db.view;
    be->gemm(da.view, dw.view, dc.view, o);
    const std::vector<float> c = to_host(*be, dc.view);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t x = 0; x < k; ++x) {
          s += static_cast<double>(qa.values[i * k + x]) * qw.values[j * k + x];
        }
        const double want = c0[i * n + j] + s * qa.scales[i] * qw.scales[j] + bias[j];
        const double exact_product = [&] {
          double e = 0;
          for (std::int64_t x = 0; x < k; ++x) e += static_cast<double>(a[i * k + x]) * w[j * k + x];
          return e;
        }();
        CAPTURE(i, j);
        // f32 rounding of sums of k products of magnitude <= 0.3.
        CHECK(std::fabs(c[i * n + j] - want) < 2e-5);
        // And near the float product: E4M3 keeps 3 mantissa bits, so each
        // operand is within 1/16 of itself (plus the subnormals' 2^-9 steps).
        double bound = 0;
        for (std::int64_t x = 0; x < k; ++x) bound += std::fabs(a[i * k + x] * w[j * k + x]) * (2.0 / 16 + 1.0 / 256);
        CHECK(std::fabs(c[i * n + j] - (c0[i * n + j] + exact_product + bias[j])) <= bound + 1e-4);
      }
    }
    for (std::int64_t j = 0; j < n; ++j) CHECK(c[j] == c0[j] + bias[j]);  // the zero row adds nothing
  }
}

TEST_CASE("fp8 gemm needs its per-channel scales", "[fp8]") {
  auto be = make_cpu_backend(1);
  auto da = to_device(*be, random_floats(16, 1), 1, 16);
  auto dw = to_device(*be, std::vector<std::uint8_t>(32, 0x38), ElemType::f8e4m3, 2, 16);
  auto dc = zeros(*be, 1, 2);
  CHECK_THROWS_WITH(be->gemm(da.view, dw.view, dc.view), Catch::Contains("fp8_e4m3 but no w_scales"));
}
