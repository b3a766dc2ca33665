// The GQA decode attention kernel (engine/backend/cuda/cuda_attention_decode.cu)
// replayed on the CPU. Its arithmetic lives in decode_attention.hpp and is
// called here as the kernel calls it: the lane roles, the batches of keys,
// the per-lane dots, the online softmax fold, the merges across lane groups
// (emulated xor shuffles), warps (emulated shared memory) and partitions.
// What is a copy of the kernel is only its loop skeleton (the order of the
// calls, the shuffle offsets and the shared-memory layout), written out
// below with the kernel's names; every formula is the shared one. Checked
// against naive attention in double over a few hundred random shapes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <vector>

#include "engine/backend/cuda/decode_attention.hpp"
#include "engine/backend/paged_index.hpp"

namespace {

using namespace twin;
using decode::kElemsPerLane;
using decode::kThreads;
using decode::kWarps;

TEST_CASE("decode attention: lane groups cover every head dim once, one aligned group per key") {
  for (std::int32_t hd = 8; hd <= decode::kMaxHeadDim; hd += 8) {
    const int lanes = decode::lanes_per_key(hd);
    const int lanes_log2 = decode::log2_int(lanes);
    REQUIRE((1 << lanes_log2) == lanes);
    CHECK(lanes * kElemsPerLane >= hd);
    CHECK((lanes == 1 || (lanes / 2) * kElemsPerLane < hd));  // the smallest such power of two
    CHECK(lanes <= 32);
    std::vector<int> seen(static_cast<std::size_t>(hd * (kThreads / lanes)), 0);
    for (int t = 0; t < kThreads; ++t) {
      const decode::LaneRole r = decode::lane_role(t, lanes_log2, hd);
      CHECK(r.groups == kThreads / lanes);
      CHECK(r.group == t / lanes);  // groups are consecutive lanes, never across a warp
      CHECK(r.group / (32 / lanes) == t / 32);
      CHECK(r.active == (r.dim0 < hd));
      if (!r.active) continue;
      for (int e = 0; e < kElemsPerLane; ++e) seen[static_cast<std::size_t>(r.group * hd + r.dim0 + e)] += 1;
      // 16-byte loads: a lane's first element is 8-aligned, so f32 (2 loads) and 16-bit (1 load) stay aligned.
      CHECK(r.dim0 % kElemsPerLane == 0);
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  }
  CHECK(decode::head_dim_supported(64));
  CHECK(decode::head_dim_supported(80));
  CHECK(decode::head_dim_supported(256));
  CHECK_FALSE(decode::head_dim_supported(4));
  CHECK_FALSE(decode::head_dim_supported(100));
  CHECK_FALSE(decode::head_dim_supported(264));
  CHECK_FALSE(decode::head_dim_supported(0));
}

TEST_CASE("decode attention: a partition's batches give each key to exactly one lane group") {
  for (int groups : {4, 8, 16, 32, 64, 128}) {
    for (int unroll : {2, 4}) {
      for (std::int32_t n : {1, 2, 7, 31, 32, 33, 255, 256, 832, 1000}) {
        std::vector<int> seen(static_cast<std::size_t>(n), 0);
        for (std::int32_t base = 0; base < n; base += unroll * groups) {
          for (int g = 0; g < groups; ++g) {
            for (int u = 0; u < unroll; ++u) {
              const std::int32_t j = decode::batch_key(base, u, groups, g);
              if (j < n) seen[static_cast<std::size_t>(j)] += 1;
            }
          }
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
      }
    }
  }
}

TEST_CASE("decode attention: GQA groups map to head blocks of at most 8 heads") {
  CHECK(decode::heads_per_block(1) == 1);
  CHECK(decode::heads_per_block(2) == 2);
  CHECK(decode::heads_per_block(3) == 4);
  CHECK(decode::heads_per_block(4) == 4);
  CHECK(decode::heads_per_block(7) == 8);
  CHECK(decode::heads_per_block(8) == 8);
  CHECK(decode::heads_per_block(32) == 8);
  CHECK(decode::head_blocks(32, 8) == 4);
  CHECK(decode::head_blocks(12, 8) == 2);  // the second block has 4 live heads
  CHECK(decode::head_blocks(7, 8) == 1);
}

TEST_CASE("decode attention: partitions fill the SMs at batch 1 and do not split a large batch") {
  const std::int32_t sms = 132;  // H200
  const int units_llama = 8;     // Llama-3.1-8B: 8 KV heads, a group of 4 in one block
  // Batch 1 at 32k: about 8 blocks per SM, at least kMinPartition keys each.
  const std::int32_t p1 = decode::partition_size(32768, units_llama, sms);
  CHECK(p1 == 256);
  CHECK(paged::num_partitions(32768, p1) * units_llama >= sms * 4);
  // 32 x 4096: a few partitions a row.
  const std::int32_t p32 = decode::partition_size(4096, 32 * units_llama, sms);
  CHECK(paged::num_partitions(4096, p32) == 5);
  CHECK(p32 % decode::kPartitionQuantum == 0);
  // 256 x 1024 fills the GPU unsplit: one partition, no merge.
  CHECK(decode::partition_size(1024, 256 * units_llama, sms) == 1024);
  CHECK(paged::num_partitions(1024, decode::partition_size(1024, 256 * units_llama, sms)) == 1);
  // Properties over many inputs.
  for (std::int32_t keys : {1, 2, 255, 256, 257, 1000, 4096, 33000, 100000, 1 << 24, 2147483647}) {
    for (std::int64_t units : {std::int64_t{1}, std::int64_t{8}, std::int64_t{64}, std::int64_t{4096},
                               std::int64_t{1} << 40}) {
      for (std::int32_t s : {0, 1, 108, 132, 1000}) {
        const std::int32_t p = decode::partition_size(keys, units, s);
        INFO("keys " << keys << " units " << units << " sms " << s << " -> " << p);
        CHECK(p >= 1);
        CHECK(paged::num_partitions(keys, p) <= decode::kMaxPartitions);
        CHECK((p >= decode::kMinPartition || p == keys));
        CHECK((p == keys || p == decode::kMinPartition || p % decode::kPartitionQuantum == 0));
      }
    }
  }
}

TEST_CASE("decode attention: the online softmax fold and merges equal a plain softmax, empty states included") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  for (int trial = 0; trial < 200; ++trial) {
    constexpr int H = 2, U = 4;
    const int keys = 1 + trial % 23;
    std::vector<float> s(static_cast<std::size_t>(keys * H)), v(static_cast<std::size_t>(keys * kElemsPerLane));
    for (float& x : s) x = dist(rng);
    for (float& x : v) x = dist(rng);
    // Two states over alternating batches (one of them may see nothing), then merged.
    decode::SoftmaxState<H> a, b;
    a.reset();
    b.reset();
    for (int base = 0, batch = 0; base < keys; base += U, ++batch) {
      float sb[U][H], vb[U][kElemsPerLane];
      for (int u = 0; u < U; ++u) {
        const bool has = base + u < keys;
        for (int h = 0; h < H; ++h) sb[u][h] = has ? s[static_cast<std::size_t>((base + u) * H + h)] : -INFINITY;
        for (int e = 0; e < kElemsPerLane; ++e) vb[u][e] = has ? v[static_cast<std::size_t>((base + u) * kElemsPerLane + e)] : 0.0f;
      }
      (batch % 2 == 0 ? a : b).fold<U>(sb, vb);
    }
    for (int h = 0; h < H; ++h) a.merge(h, b.m[h], b.l[h], b.acc[h]);
    for (int h = 0; h < H; ++h) {
      double mx = -INFINITY, l = 0;
      for (int k = 0; k < keys; ++k) mx = std::max(mx, static_cast<double>(s[static_cast<std::size_t>(k * H + h)]));
      std::vector<double> o(kElemsPerLane, 0.0);
      for (int k = 0; k < keys; ++k) {
        const double p = std::exp2(s[static_cast<std::size_t>(k * H + h)] - mx);
        l += p;
        for (int e = 0; e < kElemsPerLane; ++e) o[static_cast<std::size_t>(e)] += p * v[static_cast<std::size_t>(k * kElemsPerLane + e)];
      }
      for (int e = 0; e < kElemsPerLane; ++e) {
        CHECK(std::abs(a.acc[h][e] / a.l[h] - o[static_cast<std::size_t>(e)] / l) < 1e-5 * (1 + std::abs(o[static_cast<std::size_t>(e)] / l)));
      }
    }
  }
  // Merging two empty states stays empty (no NaN from -inf - -inf).
  decode::SoftmaxState<1> e1, e2;
  e1.reset();
  e2.reset();
  e1.merge(0, e2.m[0], e2.l[0], e2.acc[0]);
  CHECK(e1.m[0] == -INFINITY);
  CHECK(e1.l[0] == 0.0f);
  CHECK(e1.acc[0][3] == 0.0f);
  const float m[3] = {-INFINITY, 2.0f, -INFINITY}, l[3] = {0.0f, 3.0f, 0.0f}, acc[3] = {0.0f, 6.0f, 0.0f};
  const decode::Merged mg = decode::merge_parts(3, m, 1, l, 1, acc, 1);
  CHECK(mg.m == 2.0f);
  CHECK(mg.acc / mg.l == 2.0f);
}

// ---- the kernel on the host ----------------------------------------------

std::uint16_t to_bf16_bits(float f) {  // round to nearest even, as the engine's f32_to_bf16
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

struct Row {  // cuda::AttnRow
  std::int32_t row, position, first_key, table_offset;
};

struct Problem {
  std::int32_t num_heads, kv_heads, head_dim, block_size, window, sms;
  bool bf16;
  std::int64_t num_blocks;
  std::vector<float> k, v;              // f32 cache, or the bf16 cache's values
  std::vector<std::uint16_t> kb, vb;    // bf16 cache bits
  std::vector<std::int32_t> tables;
  std::vector<Row> rows;
  std::vector<float> q;                 // [rows, num_heads * head_dim]
  float scale;

  float load(const std::vector<float>& f, const std::vector<std::uint16_t>& b, std::int64_t i) const {
    return bf16 ? decode::bf16_to_f32(b[static_cast<std::size_t>(i)]) : f[static_cast<std::size_t>(i)];
  }
};

// Launch state: the kernel's parameters and the partials workspace.
struct Launch {
  std::int32_t partition_size, max_partitions;
  std::vector<float> part_acc, part_ml, out;
};

// One block of attention_decode_kernel<Dtype, Heads>: (item, blockIdx.y, partition).
template <int Heads>
void emulate_block(const Problem& pb, Launch& ln, int item, int y, int partition) {
  const int U = decode::keys_per_batch(pb.bf16 ? 2 : 4);
  const int group_size = pb.num_heads / pb.kv_heads;
  const int head_blocks = decode::head_blocks(group_size, Heads);
  const int kv_head = y / head_blocks, hblock = y % head_blocks;
  const Row r = pb.rows[static_cast<std::size_t>(item)];
  const paged::KeyRange keys =
      paged::partition_range(r.first_key, r.position - r.first_key + 1, ln.partition_size, partition);
  if (keys.begin >= keys.end) return;
  const int n = keys.end - keys.begin;
  const int hd = pb.head_dim;
  const int head0 = kv_head * group_size + hblock * Heads;
  const int nh = std::min(Heads, group_size - hblock * Heads);
  const int lanes_log2 = decode::log2_int(decode::lanes_per_key(hd));
  const int lanes = 1 << lanes_log2;

  std::vector<decode::LaneRole> role(kThreads);
  std::vector<std::array<std::array<float, kElemsPerLane>, Heads>> q(kThreads);
  std::vector<decode::SoftmaxState<Heads>> st(kThreads);
  const float qscale = pb.scale * decode::kLog2e;
  const std::int64_t qw = static_cast<std::int64_t>(pb.num_heads) * hd;
  for (int t = 0; t < kThreads; ++t) {
    role[t] = decode::lane_role(t, lanes_log2, hd);
    for (int h = 0; h < Heads; ++h) {
      for (int e = 0; e < kElemsPerLane; ++e) {
        q[t][h][e] = h < nh && role[t].active
                         ? pb.q[static_cast<std::size_t>(r.row * qw + (head0 + h) * hd + role[t].dim0 + e)] * qscale
                         : 0.0f;
      }
    }
    st[t].reset();
  }
  const std::int64_t width = static_cast<std::int64_t>(pb.kv_heads) * hd;
  const std::int32_t* table = pb.tables.data() + r.table_offset;
  constexpr int UMax = 4;
  const int per_batch = U * role[0].groups;
  for (int base = 0; base < n; base += per_batch) {
    std::vector<std::array<std::array<float, Heads>, UMax>> s(kThreads);
    std::vector<std::array<std::array<float, kElemsPerLane>, UMax>> v(kThreads);
    std::vector<std::array<bool, UMax>> has(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      for (int u = 0; u < U; ++u) {
        const int j = decode::batch_key(base, u, role[t].groups, role[t].group);
        has[t][u] = j < n;
        float kf[kElemsPerLane] = {}, vf[kElemsPerLane] = {};
        if (has[t][u] && role[t].active) {
          const std::int64_t elem = paged::slot_of(table, pb.block_size, keys.begin + j) * width +
                                    static_cast<std::int64_t>(kv_head) * hd + role[t].dim0;
          for (int e = 0; e < kElemsPerLane; ++e) {
            kf[e] = pb.load(pb.k, pb.kb, elem + e);
            vf[e] = pb.load(pb.v, pb.vb, elem + e);
          }
        }
        for (int h = 0; h < Heads; ++h) {
          float qh[kElemsPerLane];
          std::copy(q[t][h].begin(), q[t][h].end(), qh);
          s[t][u][h] = decode::dot_lane(qh, kf);
        }
        std::copy(vf, vf + kElemsPerLane, v[t][u].begin());
      }
    }
    // __shfl_xor_sync over the key's lanes: every lane reads its partner's value from before the step.
    for (int o = lanes >> 1; o > 0; o >>= 1) {
      const auto before = s;
      for (int t = 0; t < kThreads; ++t) {
        for (int u = 0; u < U; ++u) {
          for (int h = 0; h < Heads; ++h) s[t][u][h] += before[static_cast<std::size_t>(t ^ o)][u][h];
        }
      }
    }
    for (int t = 0; t < kThreads; ++t) {
      // fold<U> takes fixed-size arrays: the kernel's U is 2 (f32) or 4 (16-bit).
      auto fold = [&]<int K>() {
        float sb[K][Heads], vb[K][kElemsPerLane];
        for (int u = 0; u < K; ++u) {
          for (int h = 0; h < Heads; ++h) sb[u][h] = has[t][u] ? s[t][u][h] : -INFINITY;
          for (int e = 0; e < kElemsPerLane; ++e) vb[u][e] = v[t][u][e];
        }
        st[t].template fold<K>(sb, vb);
      };
      if (U == 2) {
        fold.template operator()<2>();
      } else {
        fold.template operator()<4>();
      }
    }
  }
  // The warp's groups: xor shuffles from offset lanes_per_key up.
  for (int o = lanes; o < 32; o <<= 1) {
    const auto before = st;
    for (int t = 0; t < kThreads; ++t) {
      const auto& other = before[static_cast<std::size_t>(t ^ o)];
      for (int h = 0; h < Heads; ++h) st[t].merge(h, other.m[h], other.l[h], other.acc[h]);
    }
  }
  // Shared memory: m [kWarps][Heads], l [kWarps][Heads], acc [kWarps][Heads][hd].
  std::vector<float> smem(static_cast<std::size_t>(kWarps * Heads * (hd + 2)), std::nanf(""));
  float* sm_m = smem.data();
  float* sm_l = sm_m + kWarps * Heads;
  float* sm_acc = sm_m + 2 * kWarps * Heads;
  for (int t = 0; t < kThreads; ++t) {
    const int warp = t >> 5, lane = t & 31;
    if (lane < lanes && role[t].active) {
      for (int h = 0; h < Heads; ++h) {
        for (int e = 0; e < kElemsPerLane; ++e) sm_acc[(warp * Heads + h) * hd + role[t].dim0 + e] = st[t].acc[h][e];
      }
    }
    if (lane == 0) {
      for (int h = 0; h < Heads; ++h) {
        sm_m[warp * Heads + h] = st[t].m[h];
        sm_l[warp * Heads + h] = st[t].l[h];
      }
    }
  }
  for (int idx = 0; idx < nh * hd; ++idx) {
    const int h = idx / hd, d = idx - h * hd;
    const decode::Merged mg = decode::merge_parts(kWarps, sm_m + h, Heads, sm_l + h, Heads, sm_acc + h * hd + d, Heads * hd);
    const int head = head0 + h;
    if (ln.max_partitions == 1) {
      ln.out[static_cast<std::size_t>(r.row * qw + head * hd + d)] = mg.acc / mg.l;
    } else {
      const std::int64_t slot = (static_cast<std::int64_t>(item) * pb.num_heads + head) * ln.max_partitions + partition;
      ln.part_acc[static_cast<std::size_t>(slot * hd + d)] = mg.acc;
      if (d == 0) {
        ln.part_ml[static_cast<std::size_t>(slot * 2)] = mg.m;
        ln.part_ml[static_cast<std::size_t>(slot * 2 + 1)] = mg.l;
      }
    }
  }
}

// launch_paged_attention_decode + attention_decode_reduce_kernel on the host.
std::vector<float> emulate(const Problem& pb) {
  const int group = pb.num_heads / pb.kv_heads;
  const int heads = decode::heads_per_block(group);
  const int hblocks = decode::head_blocks(group, heads);
  std::int32_t max_keys = 0;
  for (const Row& r : pb.rows) max_keys = std::max(max_keys, r.position - r.first_key + 1);
  Launch ln;
  // As CudaBackend::paged_attention picks it.
  ln.partition_size = decode::partition_size(max_keys, static_cast<std::int64_t>(pb.rows.size()) * pb.kv_heads * hblocks, pb.sms);
  ln.max_partitions = 0;
  for (const Row& r : pb.rows) {
    ln.max_partitions = std::max(ln.max_partitions, paged::num_partitions(r.position - r.first_key + 1, ln.partition_size));
  }
  const std::int64_t qw = static_cast<std::int64_t>(pb.num_heads) * pb.head_dim;
  const auto nrows = static_cast<std::int64_t>(pb.rows.size());
  ln.out.assign(static_cast<std::size_t>(nrows * qw), std::nanf(""));
  if (ln.max_partitions > 1) {
    ln.part_acc.assign(static_cast<std::size_t>(nrows * pb.num_heads * ln.max_partitions * pb.head_dim), std::nanf(""));
    ln.part_ml.assign(static_cast<std::size_t>(nrows * pb.num_heads * ln.max_partitions * 2), std::nanf(""));
  }
  for (int item = 0; item < nrows; ++item) {
    for (int y = 0; y < pb.kv_heads * hblocks; ++y) {
      for (int z = 0; z < ln.max_partitions; ++z) {
        switch (heads) {
          case 1: emulate_block<1>(pb, ln, item, y, z); break;
          case 2: emulate_block<2>(pb, ln, item, y, z); break;
          case 4: emulate_block<4>(pb, ln, item, y, z); break;
          default: emulate_block<8>(pb, ln, item, y, z); break;
        }
      }
    }
  }
  if (ln.max_partitions > 1) {
    const int hd = pb.head_dim;
    for (int item = 0; item < nrows; ++item) {
      const Row r = pb.rows[static_cast<std::size_t>(item)];
      const int parts = paged::num_partitions(r.position - r.first_key + 1, ln.partition_size);
      for (int head = 0; head < pb.num_heads; ++head) {
        const std::int64_t base = (static_cast<std::int64_t>(item) * pb.num_heads + head) * ln.max_partitions;
        for (int d = 0; d < hd; ++d) {
          const decode::Merged mg = decode::merge_parts(parts, ln.part_ml.data() + base * 2, 2, ln.part_ml.data() + base * 2 + 1, 2,
                                                        ln.part_acc.data() + base * hd + d, hd);
          ln.out[static_cast<std::size_t>(r.row * qw + head * hd + d)] = mg.acc / mg.l;
        }
      }
    }
  }
  return ln.out;
}

std::vector<double> naive(const Problem& pb) {
  const int group = pb.num_heads / pb.kv_heads, hd = pb.head_dim;
  const std::int64_t qw = static_cast<std::int64_t>(pb.num_heads) * hd, width = static_cast<std::int64_t>(pb.kv_heads) * hd;
  std::vector<double> out(pb.q.size(), 0.0);
  for (const Row& r : pb.rows) {
    const std::int32_t* table = pb.tables.data() + r.table_offset;
    for (int head = 0; head < pb.num_heads; ++head) {
      const int kvh = head / group;
      std::vector<double> s;
      for (std::int32_t key = r.first_key; key <= r.position; ++key) {
        const std::int64_t off = paged::slot_of(table, pb.block_size, key) * width + kvh * hd;
        double dot = 0;
        for (int d = 0; d < hd; ++d) dot += static_cast<double>(pb.q[static_cast<std::size_t>(r.row * qw + head * hd + d)]) * pb.load(pb.k, pb.kb, off + d);
        s.push_back(dot * pb.scale);
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double l = 0;
      for (double& x : s) l += (x = std::exp(x - mx));
      for (std::int32_t key = r.first_key; key <= r.position; ++key) {
        const std::int64_t off = paged::slot_of(table, pb.block_size, key) * width + kvh * hd;
        const double p = s[static_cast<std::size_t>(key - r.first_key)] / l;
        for (int d = 0; d < hd; ++d) out[static_cast<std::size_t>(r.row * qw + head * hd + d)] += p * pb.load(pb.v, pb.vb, off + d);
      }
    }
  }
  return out;
}

// Sequences of (num_query < 4, context) in scattered blocks.
Problem make_problem(std::mt19937& rng, std::int32_t num_heads, std::int32_t kv_heads, std::int32_t hd, std::int32_t bs,
                     std::int32_t window, bool bf16, std::int32_t sms,
                     const std::vector<std::pair<std::int32_t, std::int32_t>>& seqs) {
  Problem pb{num_heads, kv_heads, hd, bs, window, sms, bf16, 0, {}, {}, {}, {}, {}, {}, {}, 0.0f};
  pb.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (auto [nq, ctx] : seqs) pb.num_blocks += paged::blocks_for(ctx, bs);
  pb.num_blocks += 2;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(pb.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::size_t elems = static_cast<std::size_t>(pb.num_blocks * bs * kv_heads * hd);
  pb.k.resize(elems);
  pb.v.resize(elems);
  for (float& x : pb.k) x = 2.0f * dist(rng);  // scores of a few units: a peaked softmax
  for (float& x : pb.v) x = dist(rng);
  if (bf16) {
    for (std::size_t i = 0; i < elems; ++i) {
      pb.kb.push_back(to_bf16_bits(pb.k[i]));
      pb.vb.push_back(to_bf16_bits(pb.v[i]));
    }
  }
  std::int32_t next = 0, row = 0;
  for (auto [nq, ctx] : seqs) {
    const auto offset = static_cast<std::int32_t>(pb.tables.size());
    const std::int32_t nb = paged::blocks_for(ctx, bs);
    pb.tables.insert(pb.tables.end(), ids.begin() + next, ids.begin() + next + nb);
    next += nb;
    for (std::int32_t i = 0; i < nq; ++i) {
      const std::int32_t pos = paged::query_position(ctx, nq, i);
      pb.rows.push_back({row++, pos, paged::first_key(pos, window), offset});
    }
  }
  pb.q.resize(static_cast<std::size_t>(row) * num_heads * hd);
  for (float& x : pb.q) x = dist(rng);
  return pb;
}

TEST_CASE("decode attention kernel, emulated on the host, equals naive attention over random shapes") {
  std::mt19937 rng(2024);
  const std::int32_t ratios[] = {1, 2, 3, 4, 5, 7, 8, 12, 16, 32};
  const std::int32_t dims[] = {8, 16, 64, 72, 80, 96, 128, 256};
  const std::int32_t blocks[] = {1, 2, 3, 16, 64, 512};
  int shapes = 0;
  for (int trial = 0; trial < 320; ++trial) {
    const std::int32_t ratio = ratios[rng() % std::size(ratios)];
    const std::int32_t kv = ratio >= 16 ? 1 : static_cast<std::int32_t>(1 + rng() % 3);  // MQA for wide groups
    const std::int32_t hd = dims[rng() % std::size(dims)];
    const std::int32_t bs = blocks[rng() % std::size(blocks)];
    const bool bf16 = rng() % 2 == 0;
    const std::int32_t window = rng() % 4 == 0 ? static_cast<std::int32_t>(1 + rng() % 300) : 0;
    const std::int32_t sms = std::array<std::int32_t, 4>{1, 8, 32, 132}[rng() % 4];
    // Keep the emulation affordable: keys x heads x dims bounded per shape.
    const std::int64_t cost_per_key = static_cast<std::int64_t>(ratio) * kv * hd;
    const auto max_ctx = static_cast<std::int32_t>(std::clamp<std::int64_t>(3'000'000 / cost_per_key, 8, 3000));
    std::vector<std::pair<std::int32_t, std::int32_t>> seqs;
    const int nseq = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < nseq; ++i) {
      const std::int32_t ctx = rng() % 5 == 0 ? static_cast<std::int32_t>(1 + rng() % 4)
                                              : static_cast<std::int32_t>(1 + rng() % static_cast<std::uint32_t>(max_ctx));
      const std::int32_t nq = std::min<std::int32_t>(ctx, static_cast<std::int32_t>(1 + rng() % 3));
      seqs.push_back({nq, ctx});
    }
    const Problem pb = make_problem(rng, ratio * kv, kv, hd, bs, window, bf16, sms, seqs);
    INFO("trial " << trial << ": heads " << pb.num_heads << " kv " << kv << " hd " << hd << " block " << bs << " window "
                  << window << (bf16 ? " bf16" : " f32") << " sms " << sms << " seqs " << nseq);
    const std::vector<float> got = emulate(pb);
    const std::vector<double> want = naive(pb);
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    CHECK(worst < 2e-5);  // NaN fails too: an element never written stays NaN
    ++shapes;
  }
  CHECK(shapes == 320);
}

TEST_CASE("decode attention kernel, emulated: long contexts split into many partitions (32k at batch 1)") {
  std::mt19937 rng(77);
  // Llama-3.1-8B's group (4 heads a KV head), one KV head, on an H200's SM count.
  const Problem pb = make_problem(rng, 4, 1, 128, 16, 0, true, 132, {{1, 33000}});
  const std::vector<float> got = emulate(pb);
  const std::vector<double> want = naive(pb);
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  CHECK(worst < 2e-5);
  // And with a sliding window over it, block size 1.
  const Problem pw = make_problem(rng, 8, 1, 64, 1, 4000, false, 132, {{2, 9000}});
  const std::vector<float> gw = emulate(pw);
  const std::vector<double> ww = naive(pw);
  worst = 0;
  for (std::size_t i = 0; i < gw.size(); ++i) worst = std::max(worst, std::abs(gw[i] - ww[i]));
  CHECK(worst < 2e-5);
}

}  // namespace
