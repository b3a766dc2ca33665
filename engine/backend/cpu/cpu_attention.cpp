// Paged KV writes, block copies and paged attention on the CPU.
// Attention work items are (sequence, chunk of queries, kv heads): each item
// reads its K/V rows once for all query heads of its GQA groups and computes
// every output element in a fixed order, so results do not depend on the
// thread count or on which other sequences share the step. An item takes all
// kv heads, so it reads whole contiguous slot rows, unless there are too few
// items to keep the threads busy; then it takes one kv head.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/backend/cpu/cpu_backend_impl.hpp"
#include "engine/backend/op_checks.hpp"

namespace twin {

namespace {

constexpr std::int32_t kQueryChunk = 16;

void check_cpu_kv_dtype(const char* op, const KvCacheView& cache) {
  if (cache.dtype != ElemType::f32 && cache.dtype != ElemType::bf16 && cache.dtype != ElemType::f8e4m3) {
    throw Error(std::string(op) + ": the cpu backend keeps the KV cache in f32, bf16 or fp8_e4m3, got " +
                std::string(elem_type_name(cache.dtype)));
  }
}

// Inlined into attend_items, which has an AVX2 clone picked at run time where
// the CPU has it: same lanes and order in both, so identical bits.
inline __attribute__((always_inline)) float dot(const float* a, const float* b, std::int32_t n) {
  float lane[8] = {};
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lane[l] += a[i + l] * b[i + l];
  }
  float total = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

struct WorkItem {
  std::int32_t seq;
  std::int32_t kv_head;     // first kv head
  std::int32_t kv_count;    // kv heads handled
  std::int32_t first_query;  // index within the sequence's new tokens
  std::int32_t num_query;
};

struct AttentionJob {
  const TensorView& q;
  const TensorView& out;
  const KvCacheView& cache;
  std::span<const SeqAttention> seqs;
  const AttentionShape& shape;
  std::int32_t group;
  float scale;
};

// Over 80 lines: a kernel. Its loops share the running softmax and the
// accumulators that the compiler keeps in registers, which a split into
// calls would spill (the CUDA kernels, in .cu files, are exempt likewise).
__attribute__((target_clones("avx2", "default"))) void attend_items(const AttentionJob& job, const WorkItem* items,
                                                                    std::int64_t count) {
  const TensorView& q = job.q;
  const TensorView& out = job.out;
  const KvCacheView& cache = job.cache;
  const auto seqs = job.seqs;
  const AttentionShape& shape = job.shape;
  const std::int32_t group = job.group, hd = shape.head_dim;
  const float scale = job.scale;
  const std::int64_t slot_width = cache.slot_elems();
  const bool widen = cache.dtype != ElemType::f32;  // a 16- or 8-bit cache: the item's rows widened to f32 first
  const bool scaled = cache.k_scale != 1.0f || cache.v_scale != 1.0f;
  std::vector<float> k_rows, v_rows;      // widened: [position, item's kv heads, head_dim]
  std::vector<float> scores;              // [query heads of the item, keys]
  std::vector<std::int64_t> key_offsets;  // element offset of each position's K/V row for this kv head
  for (std::int64_t it = 0; it < count; ++it) {
    const WorkItem& w = items[it];
    const SeqAttention& seq = seqs[w.seq];
    const std::int32_t first_pos = seq.context_len - seq.num_query;
    // Resolve the block table once for every position this item can see.
    const std::int32_t last_pos = first_pos + w.first_query + w.num_query - 1;
    key_offsets.resize(static_cast<std::size_t>(last_pos) + 1);
    for (std::int32_t p = 0, blk = 0; p <= last_pos; p += cache.block_size, ++blk) {
      const std::int64_t base = static_cast<std::int64_t>(seq.block_table[blk]) * cache.block_size;
      const std::int32_t end = std::min(last_pos + 1, p + cache.block_size);
      for (std::int32_t x = p; x < end; ++x) {
        key_offsets[x] = (base + (x - p)) * slot_width + static_cast<std::int64_t>(w.kv_head) * hd;  // first kv head
      }
    }
    const float* kc = static_cast<const float*>(cache.k);
    const float* vc = static_cast<const float*>(cache.v);
    if (widen) {
      // Each position's rows of this item's kv heads, widened once and reused
      // by every query of the item; the offsets then index the copies.
      const std::int64_t width = static_cast<std::int64_t>(w.kv_count) * hd;
      const std::size_t eb = elem_bytes(cache.dtype);
      k_rows.resize(static_cast<std::size_t>((last_pos + 1) * width));
      v_rows.resize(k_rows.size());
      for (std::int32_t x = 0; x <= last_pos; ++x) {
        const auto from = static_cast<std::size_t>(key_offsets[x]) * eb;
        convert_to_f32(static_cast<const char*>(cache.k) + from, cache.dtype, k_rows.data() + x * width,
                       static_cast<std::size_t>(width));
        convert_to_f32(static_cast<const char*>(cache.v) + from, cache.dtype, v_rows.data() + x * width,
                       static_cast<std::size_t>(width));
        if (scaled) {  // an fp8 cache's values are stored / scale
          for (std::int64_t d = 0; d < width; ++d) {
            k_rows[x * width + d] *= cache.k_scale;
            v_rows[x * width + d] *= cache.v_scale;
          }
        }
        key_offsets[x] = x * width;
      }
      kc = k_rows.data();
      vc = v_rows.data();
    }
    for (std::int32_t qi = w.first_query; qi < w.first_query + w.num_query; ++qi) {
      const std::int32_t pos = first_pos + qi;
      const std::int32_t lo = shape.sliding_window > 0 ? std::max(0, pos - shape.sliding_window + 1) : 0;
      const std::int32_t n_keys = pos - lo + 1;
      const std::int32_t nh = group * w.kv_count;  // query heads of this item
      scores.resize(static_cast<std::size_t>(nh) * n_keys);
      const std::int64_t row = seq.query_start + qi;
      const float* qrow = static_cast<const float*>(q.at(row)) + static_cast<std::int64_t>(w.kv_head) * group * hd;
      for (std::int32_t j = 0; j < n_keys; ++j) {
        const float* krow = kc + key_offsets[lo + j];
        for (std::int32_t h = 0; h < nh; ++h) {
          scores[static_cast<std::int64_t>(h) * n_keys + j] = dot(qrow + h * hd, krow + (h / group) * hd, hd) * scale;
        }
      }
      float* orow = static_cast<float*>(out.at(row)) + static_cast<std::int64_t>(w.kv_head) * group * hd;
      for (std::int32_t h = 0; h < nh; ++h) {
        float* sc = scores.data() + static_cast<std::int64_t>(h) * n_keys;
        const float mx = *std::max_element(sc, sc + n_keys);
        float total = 0.0f;
        for (std::int32_t j = 0; j < n_keys; ++j) total += (sc[j] = std::exp(sc[j] - mx));
        const float inv = 1.0f / total;
        for (std::int32_t j = 0; j < n_keys; ++j) sc[j] *= inv;
        std::fill(orow + h * hd, orow + (h + 1) * hd, 0.0f);
      }
      for (std::int32_t j = 0; j < n_keys; ++j) {
        const float* vrow = vc + key_offsets[lo + j];
        for (std::int32_t h = 0; h < nh; ++h) {
          const float pj = scores[static_cast<std::int64_t>(h) * n_keys + j];
          const float* v = vrow + (h / group) * hd;
          float* o = orow + h * hd;
          for (std::int32_t d = 0; d < hd; ++d) o[d] += pj * v[d];
        }
      }
    }
  }
}

}  // namespace

void CpuBackend::kv_write(const TensorView& k, const TensorView& v, const KvCacheView& cache,
                          std::span<const std::int64_t> slots) {
  check_kv_write(k, v, cache, slots);
  check_cpu_kv_dtype("kv_write", cache);
  const std::int64_t width = cache.slot_elems();
  const std::size_t row_bytes = static_cast<std::size_t>(width) * elem_bytes(cache.dtype);
  auto* kc = static_cast<char*>(cache.k);
  auto* vc = static_cast<char*>(cache.v);
  const bool scaled = cache.k_scale != 1.0f || cache.v_scale != 1.0f;
  std::vector<float> row_k, row_v;  // a row divided by its scale (an fp8 cache with scales)
  for (std::size_t t = 0; t < slots.size(); ++t) {
    const std::int64_t s = slots[t];
    if (s < 0) continue;
    const auto row = static_cast<std::int64_t>(t);
    const float* kr = static_cast<const float*>(k.at(row));
    const float* vr = static_cast<const float*>(v.at(row));
    if (scaled) {
      row_k.assign(kr, kr + width);
      row_v.assign(vr, vr + width);
      const float k_inv = 1.0f / cache.k_scale, v_inv = 1.0f / cache.v_scale;
      for (auto& x : row_k) x *= k_inv;
      for (auto& x : row_v) x *= v_inv;
      kr = row_k.data();
      vr = row_v.data();
    }
    convert_from_f32(kr, kc + s * row_bytes, cache.dtype, static_cast<std::size_t>(width));
    convert_from_f32(vr, vc + s * row_bytes, cache.dtype, static_cast<std::size_t>(width));
  }
}

void CpuBackend::copy_blocks(const KvCacheView& src, const KvCacheView& dst, std::span<const BlockCopy> pairs) {
  check_copy_blocks(src, dst, pairs);
  const std::size_t block_bytes = static_cast<std::size_t>(src.block_elems()) * elem_bytes(src.dtype);
  for (const BlockCopy& p : pairs) {
    for (auto [s, d] : {std::pair{src.k, dst.k}, std::pair{src.v, dst.v}}) {
      std::memmove(static_cast<char*>(d) + p.dst * block_bytes, static_cast<const char*>(s) + p.src * block_bytes,
                   block_bytes);
    }
  }
}

void CpuBackend::paged_attention(const TensorView& q, const KvCacheView& cache, std::span<const SeqAttention> seqs,
                                 const AttentionShape& shape, const TensorView& out) {
  check_attention(q, cache, seqs, shape, out);
  check_cpu_kv_dtype("paged_attention", cache);
  const std::int32_t hd = shape.head_dim;
  const std::int32_t group = shape.num_heads / shape.num_kv_heads;
  const float scale = shape.scale > 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(hd));

  std::int64_t chunks = 0;
  for (const SeqAttention& sq : seqs) chunks += (sq.num_query + kQueryChunk - 1) / kQueryChunk;
  const std::int32_t kv_per_item = chunks >= 2 * static_cast<std::int64_t>(pool_.size()) ? shape.num_kv_heads : 1;
  std::vector<WorkItem> items;
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    for (std::int32_t g = 0; g < shape.num_kv_heads; g += kv_per_item) {
      for (std::int32_t i = 0; i < seqs[s].num_query; i += kQueryChunk) {
        items.push_back({static_cast<std::int32_t>(s), g, kv_per_item, i, std::min(kQueryChunk, seqs[s].num_query - i)});
      }
    }
  }

  const AttentionJob job{q, out, cache, seqs, shape, group, scale};
  pool_.parallel_for(static_cast<std::int64_t>(items.size()),
                     [&](std::int64_t b, std::int64_t e) { attend_items(job, items.data() + b, e - b); });
}

}  // namespace twin
