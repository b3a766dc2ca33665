// FP8 E4M3 conversions (engine/backend/dtype.hpp): every code, rounding at
// every midpoint, saturation, subnormals and NaN.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/backend/dtype.hpp"

using namespace twin;

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
