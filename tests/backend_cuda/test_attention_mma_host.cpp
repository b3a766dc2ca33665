// The tensor-core prefill kernel (engine/backend/cuda/cuda_attention_mma.cu)
// checked without a GPU:
//   1. a host model of a warp's ldmatrix .x4 (.trans) and mma.sync
//      m16n8k16, transcribed from the PTX ISA (mma_layout.hpp's spec_*),
//      runs the kernel's fragment addressing (mma_layout.hpp's other
//      functions) for Q·Kᵀ and P·V against naive matrix products;
//   2. a host transliteration of the kernel — same tiles, slot table, bf16
//      rounding, masks, online softmax in exp2, quad reductions, P reused
//      from the accumulators — with the instructions replaced by that model,
//      against naive attention in double over a few hundred random shapes
//      (paged caches of block size 1..512, f32 and bf16, GQA, windows,
//      chunks after a cached prefix).
// What it cannot check: the real instructions, timing, shared-memory races.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/backend/cuda/mma_layout.hpp"
#include "engine/backend/dtype.hpp"
#include "engine/backend/paged_index.hpp"

namespace {

using namespace twin;
using mma::RowCol;

// ---- a warp of the model ---------------------------------------------------

using Frag4 = std::array<std::array<std::uint32_t, 4>, 32>;  // per lane, 4 registers
using Acc = std::array<std::array<float, 4>, 32>;            // per lane, one 16 x 8 f32 accumulator

float bf(std::uint16_t h) { return bf16_to_f32(h); }
std::uint16_t to_bf(float f) { return f32_to_bf16(f); }
float round_bf(float f) { return bf(to_bf(f)); }
std::uint32_t pack(float lo, float hi) {
  return static_cast<std::uint32_t>(to_bf(lo)) | (static_cast<std::uint32_t>(to_bf(hi)) << 16);
}

// ldmatrix.x4(.trans): lane l gives the address (an element offset) of row
// l % 8 of matrix l / 8; each row is 8 consecutive bf16.
Frag4 ldmatrix_x4(const std::vector<std::uint16_t>& smem, const std::array<int, 32>& address, bool trans) {
  Frag4 out{};
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const RowCol e = mma::spec_ldmatrix(lane, half, trans);
        int row_lane = -1;
        for (int l = 0; l < 32; ++l) {
          if (mma::spec_ldmatrix_matrix_of_address_lane(l) == j && mma::spec_ldmatrix_row_of_address_lane(l) == e.row) {
            row_lane = l;
          }
        }
        const std::uint16_t v = smem.at(static_cast<std::size_t>(address[row_lane] + e.col));
        out[lane][j] |= static_cast<std::uint32_t>(v) << (16 * half);
      }
    }
  }
  return out;
}

// c += a · b, a from A registers, b from two B registers per lane.
void mma_m16n8k16(Acc& c, const std::array<std::array<std::uint32_t, 4>, 32>& a,
                  const std::array<std::array<std::uint32_t, 2>, 32>& b) {
  float A[16][16] = {}, B[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int half = 0; half < 2; ++half) {
      for (int r = 0; r < 4; ++r) {
        const RowCol e = mma::spec_a(lane, r, half);
        A[e.row][e.col] = bf(static_cast<std::uint16_t>(a[lane][r] >> (16 * half)));
      }
      for (int r = 0; r < 2; ++r) {
        const RowCol e = mma::spec_b(lane, r, half);
        B[e.row][e.col] = bf(static_cast<std::uint16_t>(b[lane][r] >> (16 * half)));
      }
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const RowCol e = mma::spec_c(lane, i);
      float sum = c[lane][i];
      for (int k = 0; k < 16; ++k) sum += A[e.row][k] * B[k][e.col];
      c[lane][i] = sum;
    }
  }
}

std::array<std::array<std::uint32_t, 2>, 32> b_regs(const Frag4& f, int first) {
  std::array<std::array<std::uint32_t, 2>, 32> b{};
  for (int lane = 0; lane < 32; ++lane) b[lane] = {f[lane][first], f[lane][first + 1]};
  return b;
}

// The kernel's S = Q·Kᵀ for one warp: Q rows [q_row0, +16), K rows [0, keys)
// of shared memory with row stride `stride`, dim columns.
std::vector<Acc> warp_qk(const std::vector<std::uint16_t>& smem, int q_base, int k_base, int stride, int dim,
                         int keys, int q_row0) {
  const int steps = dim / 16;
  std::vector<Frag4> qf(static_cast<std::size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    std::array<int, 32> addr{};
    for (int lane = 0; lane < 32; ++lane) {
      const RowCol a = mma::ldsm_a_address(lane);
      addr[lane] = q_base + (q_row0 + a.row) * stride + s * 16 + a.col;
    }
    qf[s] = ldmatrix_x4(smem, addr, false);
  }
  std::vector<Acc> acc(static_cast<std::size_t>(keys / 8), Acc{});
  for (int s = 0; s < steps; ++s) {
    for (int j = 0; j < keys / 8; j += 2) {
      std::array<int, 32> addr{};
      for (int lane = 0; lane < 32; ++lane) {
        const RowCol b = mma::ldsm_b_address(lane);
        addr[lane] = k_base + (j * 8 + b.row) * stride + s * 16 + b.col;
      }
      const Frag4 kf = ldmatrix_x4(smem, addr, false);
      mma_m16n8k16(acc[j], qf[s], b_regs(kf, 0));
      mma_m16n8k16(acc[j + 1], qf[s], b_regs(kf, 2));
    }
  }
  return acc;
}

// The kernel's O += P·V for one warp; pf[j][lane][h] = packed P of n-tile j.
using PFrag = std::vector<std::array<std::array<std::uint32_t, 2>, 32>>;
void warp_pv(std::vector<Acc>& o, const PFrag& pf, const std::vector<std::uint16_t>& smem, int v_base, int stride,
             int dim, int keys) {
  for (int st = 0; st < keys / 16; ++st) {
    std::array<std::array<std::uint32_t, 4>, 32> a{};
    for (int lane = 0; lane < 32; ++lane) {
      for (int r = 0; r < 4; ++r) {
        const mma::AccIndex src = mma::p_operand(st, r, 0);
        a[lane][r] = pf[static_cast<std::size_t>(src.ntile)][lane][src.elem / 2];
      }
    }
    for (int j = 0; j < dim / 8; j += 2) {
      std::array<int, 32> addr{};
      for (int lane = 0; lane < 32; ++lane) {
        const RowCol b = mma::ldsm_bt_address(lane);
        addr[lane] = v_base + (st * 16 + b.row) * stride + j * 8 + b.col;
      }
      const Frag4 vf = ldmatrix_x4(smem, addr, true);
      mma_m16n8k16(o[j], a, b_regs(vf, 0));
      mma_m16n8k16(o[j + 1], a, b_regs(vf, 2));
    }
  }
}

}  // namespace

TEST_CASE("mma fragment spec: every element of A, B and C has exactly one owner (lane, register, half)") {
  std::array<int, 256> a{};
  std::array<int, 128> b{}, c{};
  std::array<int, 64> m{}, mt{};
  for (int lane = 0; lane < 32; ++lane) {
    for (int half = 0; half < 2; ++half) {
      for (int r = 0; r < 4; ++r) {
        const RowCol e = mma::spec_a(lane, r, half);
        a[static_cast<std::size_t>(e.row * 16 + e.col)] += 1;
      }
      for (int r = 0; r < 2; ++r) {
        const RowCol e = mma::spec_b(lane, r, half);
        b[static_cast<std::size_t>(e.row * 8 + e.col)] += 1;
      }
      const RowCol e = mma::spec_ldmatrix(lane, half, false), t = mma::spec_ldmatrix(lane, half, true);
      m[static_cast<std::size_t>(e.row * 8 + e.col)] += 1;
      mt[static_cast<std::size_t>(t.row * 8 + t.col)] += 1;
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol e = mma::spec_c(lane, i);
      c[static_cast<std::size_t>(e.row * 8 + e.col)] += 1;
    }
  }
  auto ones = [](const auto& v) { return std::all_of(v.begin(), v.end(), [](int n) { return n == 1; }); };
  CHECK(ones(a));
  CHECK(ones(b));
  CHECK(ones(c));
  CHECK(ones(m));
  CHECK(ones(mt));
  // The accumulator pair a P operand register takes is one lane's elements (2h, 2h + 1).
  for (int st = 0; st < 4; ++st) {
    for (int r = 0; r < 4; ++r) {
      const mma::AccIndex lo = mma::p_operand(st, r, 0), hi = mma::p_operand(st, r, 1);
      CHECK(lo.ntile == hi.ntile);
      CHECK(lo.elem % 2 == 0);
      CHECK(hi.elem == lo.elem + 1);
    }
  }
}

TEST_CASE("the kernel's ldmatrix addressing and accumulator reuse compute Q.K^T and P.V on the mma model") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int dim : {64, 128}) {
    const int keys = 64, stride = dim + 8, rows = 32;
    const int q_base = 0, k_base = rows * stride, v_base = k_base + keys * stride;
    std::vector<std::uint16_t> smem(static_cast<std::size_t>(v_base + keys * stride), 0x7fc0);  // NaN padding
    for (int r = 0; r < rows + 2 * keys; ++r) {
      for (int d = 0; d < dim; ++d) smem[static_cast<std::size_t>(r * stride + d)] = to_bf(dist(rng));
    }
    auto at = [&](int base, int r, int d) { return bf(smem[static_cast<std::size_t>(base + r * stride + d)]); };
    for (int warp = 0; warp < 2; ++warp) {  // rows 16 warp .. : the warp's offset into the Q block
      const std::vector<Acc> s = warp_qk(smem, q_base, k_base, stride, dim, keys, 16 * warp);
      double worst = 0.0;
      for (int j = 0; j < keys / 8; ++j) {
        for (int lane = 0; lane < 32; ++lane) {
          for (int i = 0; i < 4; ++i) {
            const RowCol e = mma::acc_element(lane, i);
            double ref = 0.0;
            for (int d = 0; d < dim; ++d) ref += static_cast<double>(at(q_base, 16 * warp + e.row, d)) * at(k_base, j * 8 + e.col, d);
            worst = std::max(worst, std::abs(ref - s[j][lane][i]));
          }
        }
      }
      INFO("dim " << dim << " warp " << warp);
      CHECK(worst < 1e-4);

      // P from the accumulators (any values: take S), rounded to bf16 and
      // packed as the kernel packs them; O = P·V.
      PFrag pf(static_cast<std::size_t>(keys / 8));
      std::vector<std::vector<float>> p(16, std::vector<float>(static_cast<std::size_t>(keys)));
      for (int j = 0; j < keys / 8; ++j) {
        for (int lane = 0; lane < 32; ++lane) {
          for (int h = 0; h < 2; ++h) {
            pf[j][lane][h] = pack(s[j][lane][2 * h], s[j][lane][2 * h + 1]);
            for (int e2 = 0; e2 < 2; ++e2) {
              const RowCol e = mma::acc_element(lane, 2 * h + e2);
              p[e.row][static_cast<std::size_t>(j * 8 + e.col)] = round_bf(s[j][lane][2 * h + e2]);
            }
          }
        }
      }
      std::vector<Acc> o(static_cast<std::size_t>(dim / 8), Acc{});
      warp_pv(o, pf, smem, v_base, stride, dim, keys);
      double worst_o = 0.0;
      for (int j = 0; j < dim / 8; ++j) {
        for (int lane = 0; lane < 32; ++lane) {
          for (int i = 0; i < 4; ++i) {
            const RowCol e = mma::acc_element(lane, i);
            double ref = 0.0;
            for (int k = 0; k < keys; ++k) ref += static_cast<double>(p[e.row][k]) * at(v_base, k, j * 8 + e.col);
            worst_o = std::max(worst_o, std::abs(ref - o[j][lane][i]) / (1.0 + std::abs(ref)));
          }
        }
      }
      CHECK(worst_o < 1e-4);
    }
  }
}

namespace {

// ---- the kernel, transliterated -------------------------------------------

constexpr int kRows = 64, kKeys = 64, kWarps = 4;

struct Problem {
  int num_heads = 0, kv_heads = 0, dim = 0, block_size = 0, window = 0;
  bool bf16_cache = false;
  int num_query = 0, context_len = 0;
  std::vector<float> q;             // [num_query, num_heads * dim], stride num_heads * dim
  std::vector<float> k, v;          // f32 values (bf16-representable when bf16_cache) per position
  std::vector<std::int32_t> table;  // block ids
  std::int32_t num_blocks = 0;
};

// One paged cache tensor [num_blocks, block_size, kv_heads, dim] holding the
// sequence's positions at their slots, the rest NaN (must never be read).
std::vector<float> paged(const Problem& pb, const std::vector<float>& rows) {
  std::vector<float> cache(static_cast<std::size_t>(pb.num_blocks) * pb.block_size * pb.kv_heads * pb.dim,
                           std::numeric_limits<float>::quiet_NaN());
  const int width = pb.kv_heads * pb.dim;
  for (int pos = 0; pos < pb.context_len; ++pos) {
    const std::int64_t slot = paged::slot_of(pb.table.data(), pb.block_size, pos);
    for (int h = 0; h < pb.kv_heads; ++h) {
      for (int d = 0; d < pb.dim; ++d) {
        cache[static_cast<std::size_t>(paged::kv_offset(slot, pb.kv_heads, pb.dim, h) + d)] =
            rows[static_cast<std::size_t>(pos * width + h * pb.dim + d)];
      }
    }
  }
  return cache;
}

std::vector<float> emulate_kernel(const Problem& pb, float scale) {
  const int group = pb.num_heads / pb.kv_heads, dim = pb.dim, stride = dim + 8;
  const int total = pb.num_query * group;
  const int position0 = paged::query_position(pb.context_len, pb.num_query, 0);
  const float scale_log2 = scale * 1.4426950408889634f;
  const std::vector<float> kc = paged(pb, pb.k), vc = paged(pb, pb.v);
  const int q_stride = pb.num_heads * dim;
  std::vector<float> out(pb.q.size(), std::numeric_limits<float>::quiet_NaN());
  const int q_base = 0, k_base = kRows * stride, v_base = k_base + kKeys * stride;
  std::vector<std::uint16_t> smem(static_cast<std::size_t>(v_base + kKeys * stride));

  for (int kv_head = 0; kv_head < pb.kv_heads; ++kv_head) {
    for (int tile = 0; tile < paged::packed_tiles(pb.num_query, group, kRows); ++tile) {
      const int packed_begin = tile * kRows;
      std::fill(smem.begin(), smem.end(), std::uint16_t{0x7fc0});  // NaN where nothing is written
      for (int r = 0; r < kRows; ++r) {
        for (int d = 0; d < dim; ++d) {
          const int packed = packed_begin + r;
          float x = 0.0f;
          if (packed < total) {
            const paged::PackedRow pr = paged::packed_row(packed, group);
            x = pb.q[static_cast<std::size_t>(pr.query * q_stride + (kv_head * group + pr.head) * dim + d)];
          }
          smem[static_cast<std::size_t>(q_base + r * stride + d)] = to_bf(x);
        }
      }
      const int last_packed = std::min(packed_begin + kRows, total) - 1;
      const std::int32_t pos_lo = paged::packed_position(position0, packed_begin, total, group);
      const std::int32_t pos_hi = paged::packed_position(position0, last_packed, total, group);

      // Per warp and lane, the kernel's registers.
      struct LaneState {
        std::int32_t row_pos[2];
        float row_max[2] = {-INFINITY, -INFINITY};
        float row_sum[2] = {0.0f, 0.0f};
      };
      std::vector<std::array<LaneState, 32>> st(kWarps);
      std::vector<std::vector<Acc>> o(kWarps, std::vector<Acc>(static_cast<std::size_t>(dim / 8), Acc{}));
      for (int w = 0; w < kWarps; ++w) {
        for (int lane = 0; lane < 32; ++lane) {
          for (int h = 0; h < 2; ++h) {
            st[w][lane].row_pos[h] = paged::packed_position(
                position0, packed_begin + w * 16 + mma::acc_element(lane, 2 * h).row, total, group);
          }
        }
      }

      const paged::KeyRange keys = paged::tile_keys(pos_lo, pos_hi - pos_lo + 1, pb.window);
      for (std::int32_t kb = keys.begin; kb < keys.end; kb += kKeys) {
        std::int64_t base_s[kKeys];
        for (int i = 0; i < kKeys; ++i) {
          const std::int32_t key = kb + i;
          base_s[i] = key < keys.end
                          ? paged::kv_offset(paged::slot_of(pb.table.data(), pb.block_size, key), pb.kv_heads, dim, kv_head)
                          : -1;
        }
        for (int row = 0; row < kKeys; ++row) {
          for (int d = 0; d < dim; ++d) {
            const std::int64_t b = base_s[row];
            // f32 caches round on the way in; bf16 values are already exact.
            smem[static_cast<std::size_t>(k_base + row * stride + d)] = b >= 0 ? to_bf(kc[static_cast<std::size_t>(b + d)]) : 0;
            smem[static_cast<std::size_t>(v_base + row * stride + d)] = b >= 0 ? to_bf(vc[static_cast<std::size_t>(b + d)]) : 0;
          }
        }
        const bool unmasked = paged::key_tile_unmasked(kb, kKeys, pos_lo, pos_hi, pb.window);
        for (int w = 0; w < kWarps; ++w) {
          std::vector<Acc> s = warp_qk(smem, q_base, k_base, stride, dim, kKeys, w * 16);
          float tile_max[32][2];
          for (int lane = 0; lane < 32; ++lane) {
            tile_max[lane][0] = tile_max[lane][1] = -INFINITY;
            for (int j = 0; j < kKeys / 8; ++j) {
              for (int i = 0; i < 4; ++i) {
                float x = s[j][lane][i] * scale_log2;
                const std::int32_t key = kb + j * 8 + mma::acc_element(lane, i).col;
                const bool visible = paged::key_visible(key, st[w][lane].row_pos[i / 2], pb.window);
                if (unmasked) REQUIRE(visible);  // the skip is only taken where nothing is masked
                if (!unmasked && !visible) x = -INFINITY;
                s[j][lane][i] = x;
                tile_max[lane][i / 2] = std::max(tile_max[lane][i / 2], x);
              }
            }
          }
          PFrag pf(static_cast<std::size_t>(kKeys / 8));
          for (int lane = 0; lane < 32; ++lane) {
            LaneState& ls = st[w][lane];
            float ref[2];
            for (int h = 0; h < 2; ++h) {
              float m = -INFINITY;  // __shfl_xor 1, 2: the quad of lane / 4
              for (int q = 0; q < 4; ++q) m = std::max(m, tile_max[(lane & ~3) + q][h]);
              const float new_max = std::max(ls.row_max[h], m);
              ref[h] = new_max == -INFINITY ? 0.0f : new_max;
              const float rescale = std::exp2(ls.row_max[h] - ref[h]);
              ls.row_max[h] = new_max;
              ls.row_sum[h] *= rescale;
              for (int j = 0; j < dim / 8; ++j) {
                o[w][j][lane][2 * h] *= rescale;
                o[w][j][lane][2 * h + 1] *= rescale;
              }
            }
            for (int j = 0; j < kKeys / 8; ++j) {
              for (int h = 0; h < 2; ++h) {
                const std::uint32_t wgt =
                    pack(std::exp2(s[j][lane][2 * h] - ref[h]), std::exp2(s[j][lane][2 * h + 1] - ref[h]));
                ls.row_sum[h] += bf(static_cast<std::uint16_t>(wgt)) + bf(static_cast<std::uint16_t>(wgt >> 16));
                pf[j][lane][h] = wgt;
              }
            }
          }
          warp_pv(o[w], pf, smem, v_base, stride, dim, kKeys);
        }
      }

      for (int w = 0; w < kWarps; ++w) {
        for (int lane = 0; lane < 32; ++lane) {
          for (int h = 0; h < 2; ++h) {
            float sum = 0.0f;  // __shfl_xor 1, 2
            for (int q = 0; q < 4; ++q) sum += st[w][(lane & ~3) + q].row_sum[h];
            const int packed = packed_begin + w * 16 + mma::acc_element(lane, 2 * h).row;
            if (packed >= total) continue;
            const float inv = 1.0f / sum;
            const paged::PackedRow pr = paged::packed_row(packed, group);
            for (int j = 0; j < dim / 8; ++j) {
              const int col = j * 8 + mma::acc_element(lane, 2 * h).col;
              const std::size_t at = static_cast<std::size_t>(pr.query * q_stride + (kv_head * group + pr.head) * dim + col);
              out[at] = o[w][j][lane][2 * h] * inv;
              out[at + 1] = o[w][j][lane][2 * h + 1] * inv;
            }
          }
        }
      }
    }
  }
  return out;
}

// Attention in double over the same inputs (q, k, v exactly as given).
std::vector<double> naive(const Problem& pb, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, double scale) {
  const int group = pb.num_heads / pb.kv_heads, width = pb.kv_heads * pb.dim, q_stride = pb.num_heads * pb.dim;
  std::vector<double> out(q.size());
  for (int i = 0; i < pb.num_query; ++i) {
    const int pos = paged::query_position(pb.context_len, pb.num_query, i);
    for (int h = 0; h < pb.num_heads; ++h) {
      const int kvh = h / group;
      std::vector<double> w;
      double mx = -INFINITY;
      const int first = paged::first_key(pos, pb.window);
      for (int key = first; key <= pos; ++key) {
        double s = 0.0;
        for (int d = 0; d < pb.dim; ++d) {
          s += static_cast<double>(q[static_cast<std::size_t>(i * q_stride + h * pb.dim + d)]) *
               k[static_cast<std::size_t>(key * width + kvh * pb.dim + d)];
        }
        w.push_back(s * scale);
        mx = std::max(mx, s * scale);
      }
      double sum = 0.0;
      for (double& x : w) sum += (x = std::exp(x - mx));
      for (int d = 0; d < pb.dim; ++d) {
        double acc = 0.0;
        for (int key = first; key <= pos; ++key) {
          acc += w[static_cast<std::size_t>(key - first)] * v[static_cast<std::size_t>(key * width + kvh * pb.dim + d)];
        }
        out[static_cast<std::size_t>(i * q_stride + h * pb.dim + d)] = acc / sum;
      }
    }
  }
  return out;
}

std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  std::transform(x.begin(), x.end(), r.begin(), round_bf);
  return r;
}

}  // namespace

// Tolerance: inputs uniform in [-1, 1]. Against attention on the exact f32
// inputs the kernel differs by bf16's rounding of Q, K (relative 2^-9 each:
// a score moves by about 2^-8 |q||k| scale ~ 0.004 x sqrt(dim) / sqrt(dim) in
// the worst case, far less on average), of P (relative 2^-9) and of V
// (2^-9 |v|): the outputs, averages of V, move by a few 1e-3. The bound
// used, 1.5e-2 absolute, is what the GPU test uses too; against attention on
// bf16-rounded Q, K, V only P's rounding and f32 sums remain: 4e-3.
constexpr double kBf16Tolerance = 1.5e-2;
constexpr double kRoundedInputsTolerance = 4e-3;

TEST_CASE("the tensor-core kernel's tile loop, emulated on the mma model, matches attention in double") {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto pick = [&](std::initializer_list<int> xs) {
    return *(xs.begin() + static_cast<std::ptrdiff_t>(rng() % xs.size()));
  };
  double worst = 0.0, worst_rounded = 0.0;
  int shapes = 0;
  for (int it = 0; it < 240; ++it) {
    Problem pb;
    pb.dim = it % 3 == 0 ? 128 : 64;
    const int group = pick({1, 1, 4, 8});
    pb.kv_heads = pick({1, 2});
    pb.num_heads = pb.kv_heads * group;
    pb.block_size = pick({1, 3, 16, 64, 100, 256, 512});
    pb.window = pick({0, 0, 0, 1, 17, 64, 130});
    pb.bf16_cache = rng() % 2 == 0;
    // Small chunks dominate (runtime); some long prompts and prefixes.
    pb.num_query = it % 20 == 0 ? pick({150, 257, 300}) : pick({1, 4, 7, 16, 33, 64, 65, 100});
    const int prefix = pick({0, 0, 1, 63, 64, 200});
    pb.context_len = pb.num_query + prefix;
    const int scale_total = pb.num_query * pb.num_heads * pb.context_len * pb.dim;
    if (scale_total > 12'000'000) pb.num_query = std::max(1, pb.num_query / 4), pb.context_len = pb.num_query + prefix;
    const int blocks = paged::blocks_for(pb.context_len, pb.block_size);
    pb.num_blocks = blocks + 2;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(pb.num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    pb.table.assign(ids.begin(), ids.begin() + blocks);
    const int width = pb.kv_heads * pb.dim;
    pb.q.resize(static_cast<std::size_t>(pb.num_query) * pb.num_heads * pb.dim);
    pb.k.resize(static_cast<std::size_t>(pb.context_len) * width);
    pb.v.resize(pb.k.size());
    for (auto& x : pb.q) x = dist(rng);
    for (auto& x : pb.k) x = dist(rng);
    for (auto& x : pb.v) x = dist(rng);
    if (pb.bf16_cache) {  // a bf16 cache holds bf16 values
      pb.k = rounded(pb.k);
      pb.v = rounded(pb.v);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(pb.dim));
    const std::vector<float> got = emulate_kernel(pb, scale);
    const std::vector<double> exact = naive(pb, pb.q, pb.k, pb.v, scale);
    const std::vector<double> on_rounded = naive(pb, rounded(pb.q), rounded(pb.k), rounded(pb.v), scale);
    double e = 0.0, er = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      e = std::max(e, std::abs(got[i] - exact[i]));
      er = std::max(er, std::abs(got[i] - on_rounded[i]));
    }
    INFO("dim " << pb.dim << " heads " << pb.num_heads << "/" << pb.kv_heads << " block " << pb.block_size
                << " window " << pb.window << " new " << pb.num_query << " context " << pb.context_len
                << (pb.bf16_cache ? " bf16" : " f32"));
    REQUIRE(std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); }));
    CHECK(e < kBf16Tolerance);
    CHECK(er < kRoundedInputsTolerance);
    worst = std::max(worst, e);
    worst_rounded = std::max(worst_rounded, er);
    ++shapes;
  }
  WARN("mma emulation over " << shapes << " shapes: max |error| " << worst << " against exact inputs, "
                             << worst_rounded << " against bf16-rounded inputs");
}
