#pragma once
// Helpers for backend tests: seeded random data, tensors on a backend built
// from host vectors and read back, and closeness checks. Written against the
// Backend interface only, so another backend can be run through the same tests.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/error.hpp"
#include "engine/backend/backend.hpp"

namespace twin::test {

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

inline std::vector<float> bf16_round(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(f32_to_bf16(v[i]));
  return out;
}

// What an fp8 KV cache with this scale reads back: stored as x x (1 / scale)
// rounded to E4M3, read as the stored value x scale (as the backends do).
inline std::vector<float> fp8_round(const std::vector<float>& v, float scale) {
  const float inv = 1.0f / scale;
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = fp8e4m3_to_f32(f32_to_fp8e4m3(v[i] * inv)) * scale;
  return out;
}

// A tensor on the backend: owns its buffer, exposes the view.
struct DeviceTensor {
  Buffer buffer;
  TensorView view;
};

template <typename T>
DeviceTensor to_device(Backend& be, const std::vector<T>& host, ElemType dtype, std::int64_t rows, std::int64_t cols) {
  REQUIRE(static_cast<std::int64_t>(host.size()) == rows * cols);
  REQUIRE(sizeof(T) == elem_bytes(dtype));
  DeviceTensor t{be.allocate(host.size() * sizeof(T) + 64), {}};
  t.view = t.buffer.view(dtype, rows, cols);
  be.upload(t.view.data, host.data(), host.size() * sizeof(T));
  return t;
}

inline DeviceTensor to_device(Backend& be, const std::vector<float>& host, std::int64_t rows, std::int64_t cols) {
  return to_device(be, host, ElemType::f32, rows, cols);
}

inline DeviceTensor zeros(Backend& be, std::int64_t rows, std::int64_t cols, ElemType dtype = ElemType::f32) {
  DeviceTensor t{be.allocate(static_cast<std::size_t>(rows * cols) * elem_bytes(dtype) + 64), {}};
  t.view = t.buffer.view(dtype, rows, cols);
  std::vector<char> z(static_cast<std::size_t>(rows * cols) * elem_bytes(dtype), 0);
  be.upload(t.view.data, z.data(), z.size());
  return t;
}

// Reads a (possibly strided) f32 or i32 view back to the host, row-major packed.
template <typename T = float>
std::vector<T> to_host(Backend& be, const TensorView& v) {
  std::vector<T> out(static_cast<std::size_t>(v.rows * v.cols));
  for (std::int64_t r = 0; r < v.rows; ++r) {
    be.download(out.data() + r * v.cols, v.at(r), static_cast<std::size_t>(v.cols) * sizeof(T));
  }
  return out;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace twin::test
