#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <thread>

#include "base/error.hpp"
#include "engine/backend/cpu/cpu_backend.hpp"
#include "engine/backend/cpu/cpu_backend_impl.hpp"
#include "engine/backend/op_checks.hpp"
#include "engine/backend/rope.hpp"

namespace twin {

namespace {

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

std::int64_t meminfo_bytes(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  std::int64_t kb = 0;
  std::string unit;
  while (in >> name >> kb >> unit) {
    if (name == key) return kb * 1024;
  }
  return 0;
}

// Loads a row of a weight vector (f32 or bf16) as f32.
void load_row_f32(const TensorView& t, std::int64_t row, float* dst) {
  convert_to_f32(t.at(row), t.dtype, dst, static_cast<std::size_t>(t.cols));
}

float sum_squares(const float* x, std::int64_t n) {
  // Eight lanes so the compiler can vectorise; the order is fixed, so the
  // result does not depend on threads.
  float lane[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lane[l] += x[i + l] * x[i + l];
  }
  float total = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
  for (; i < n; ++i) total += x[i] * x[i];
  return total;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::int32_t threads) {
  return std::make_unique<CpuBackend>(resolve_threads(threads));
}

CpuBackend::CpuBackend(int threads) : pool_(threads), threads_(threads) {
  // GEMMs are split over our own pool in fixed tiles (cpu_gemm.cpp), each a
  // single-threaded OpenBLAS call: OpenBLAS's threads would change results
  // with the thread count and oversubscribe the cores.
  openblas_set_num_threads(1);
}

DeviceInfo CpuBackend::device_info() const {
  DeviceInfo info;
  info.name = "cpu (" + std::to_string(threads_) + " threads)";
  info.total_bytes = meminfo_bytes("MemTotal:");
  info.free_bytes = meminfo_bytes("MemAvailable:");
  info.threads = threads_;
  return info;
}

Buffer CpuBackend::allocate(std::size_t bytes, MemoryKind kind) {
  if (bytes == 0) return Buffer(this, nullptr, 0, kind);
  constexpr std::size_t kAlign = 64;
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) throw Error("cpu backend: cannot allocate " + std::to_string(bytes) + " bytes");
  return Buffer(this, p, bytes, kind);
}

void CpuBackend::release(void* data, std::size_t, MemoryKind) noexcept { std::free(data); }

void CpuBackend::upload(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::download(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void CpuBackend::copy(const TensorView& src, const TensorView& dst) {
  check_copy(src, dst);
  pool_.parallel_for(src.rows, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> row(static_cast<std::size_t>(src.cols));
    for (std::int64_t r = r0; r < r1; ++r) {
      if (src.dtype == dst.dtype) {
        std::memcpy(dst.at(r), src.at(r), static_cast<std::size_t>(src.cols) * elem_bytes(src.dtype));
      } else {
        convert_to_f32(src.at(r), src.dtype, row.data(), row.size());
        convert_from_f32(row.data(), dst.at(r), dst.dtype, row.size());
      }
    }
  });
}

void CpuBackend::fill(const TensorView& dst, float value) {
  check_fill(dst);
  for (std::int64_t r = 0; r < dst.rows; ++r) {
    float* p = static_cast<float*>(dst.at(r));
    std::fill(p, p + dst.cols, value);
  }
}

void CpuBackend::embedding(std::span<const TokenId> ids, const TensorView& table, const TensorView& out) {
  check_embedding(ids, table, out);
  pool_.parallel_for(out.rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) load_row_f32(table, ids[r], static_cast<float*>(out.at(r)));
  });
}

void CpuBackend::gather_rows(const TensorView& src, std::span<const std::int32_t> rows, const TensorView& dst) {
  check_gather_rows(src, rows, dst);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(dst.at(static_cast<std::int64_t>(i)), src.at(rows[i]),
                static_cast<std::size_t>(src.cols) * sizeof(float));
  }
}

void CpuBackend::add(const TensorView& x, const TensorView& y) {
  check_add(x, y);
  pool_.parallel_for(x.rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float* xp = static_cast<float*>(x.at(r));
      const float* yp = static_cast<const float*>(y.at(r));
      for (std::int64_t c = 0; c < x.cols; ++c) xp[c] += yp[c];
    }
  });
}

void CpuBackend::rmsnorm(const TensorView& x, const TensorView& weight, float eps, const TensorView& out) {
  check_rmsnorm(x, weight, out);
  std::vector<float> w(static_cast<std::size_t>(x.cols));
  load_row_f32(weight, 0, w.data());
  pool_.parallel_for(x.rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xp = static_cast<const float*>(x.at(r));
      float* op = static_cast<float*>(out.at(r));
      const float inv = 1.0f / std::sqrt(sum_squares(xp, x.cols) / static_cast<float>(x.cols) + eps);
      for (std::int64_t c = 0; c < x.cols; ++c) op[c] = xp[c] * inv * w[c];
    }
  });
}

void CpuBackend::add_rmsnorm(const TensorView& residual, const TensorView& delta, const TensorView& weight,
                             float eps, const TensorView& out) {
  // All checked before add() changes residual, so a bad weight or out leaves it as it was.
  check_add_rmsnorm(residual, delta, weight, out);
  add(residual, delta);
  rmsnorm(residual, weight, eps, out);
}

void CpuBackend::rotary(const TensorView& q, const TensorView& k, std::span<const std::int32_t> positions,
                        const RopeConfig& rope) {
  check_rotary(q, k, positions, rope);
  const std::int32_t hd = rope.head_dim;
  const std::int32_t rot = rope.rotary_dim > 0 ? rope.rotary_dim : hd;
  const auto tokens = static_cast<std::int64_t>(positions.size());
  const std::int32_t half = rot / 2;
  const std::vector<double> inv_freq = rope_inv_freq(rope);
  pool_.parallel_for(tokens, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<float> cos_t(static_cast<std::size_t>(half)), sin_t(static_cast<std::size_t>(half));
    for (std::int64_t t = t0; t < t1; ++t) {
      for (std::int32_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[t]) * inv_freq[i];
        cos_t[i] = static_cast<float>(std::cos(angle));
        sin_t[i] = static_cast<float>(std::sin(angle));
      }
      for (const TensorView* m : {&q, &k}) {
        float* row = static_cast<float*>(m->at(t));
        for (std::int64_t h = 0; h < m->cols / hd; ++h) {
          float* x = row + h * hd;
          for (std::int32_t i = 0; i < half; ++i) {
            const float a = x[i], b = x[i + half];
            x[i] = a * cos_t[i] - b * sin_t[i];
            x[i + half] = b * cos_t[i] + a * sin_t[i];
          }
        }
      }
    }
  });
}

void CpuBackend::silu_and_mul(const TensorView& gate_up, const TensorView& out) {
  check_silu_and_mul(gate_up, out);
  pool_.parallel_for(out.rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* g = static_cast<const float*>(gate_up.at(r));
      const float* u = g + out.cols;
      float* o = static_cast<float*>(out.at(r));
      for (std::int64_t c = 0; c < out.cols; ++c) o[c] = g[c] / (1.0f + std::exp(-g[c])) * u[c];
    }
  });
}

void CpuBackend::begin_op_timing(std::size_t marks) {
  marks_.assign(marks, {});
  marked_.assign(marks, false);
}

void CpuBackend::mark_op(std::size_t index) {
  if (index >= marks_.size()) {
    throw Error("cpu backend: op timing mark " + std::to_string(index) + " beyond the " +
                std::to_string(marks_.size()) + " begun");
  }
  marks_[index] = std::chrono::steady_clock::now();
  marked_[index] = true;
}

void CpuBackend::read_op_marks(std::span<double> ns) {
  for (std::size_t i = 0; i < ns.size(); ++i) {
    if (i >= marks_.size() || !marked_[i]) {
      throw Error("cpu backend: op timing mark " + std::to_string(i) + " was not recorded");
    }
    ns[i] = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(marks_[i] - marks_[0]).count());
  }
}


}  // namespace twin
