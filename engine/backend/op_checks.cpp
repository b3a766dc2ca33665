#include "engine/backend/op_checks.hpp"

#include <string>

#include "engine/core/error.hpp"

namespace twin {

namespace {

[[noreturn]] void fail(std::string_view op, const std::string& message) {
  throw Error(std::string(op) + ": " + message);
}

}  // namespace

std::string shape_str(const TensorView& t) {
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string.
  std::string s = "[";
  s += std::to_string(t.rows);
  s += ", ";
  s += std::to_string(t.cols);
  s += "] ";
  s += elem_type_name(t.dtype);
  return s;
}

void check_view(std::string_view op, std::string_view what, const TensorView& t) {
  if (t.rows < 0 || t.cols < 0 || t.row_stride < t.cols) {
    fail(op, std::string(what) + " has a bad shape " + shape_str(t) + " with row stride " +
                 std::to_string(t.row_stride));
  }
  if (t.data == nullptr && t.rows * t.cols > 0) fail(op, std::string(what) + " has no data");
}

void check_dtype(std::string_view op, std::string_view what, const TensorView& t,
                 std::initializer_list<ElemType> allowed) {
  check_view(op, what, t);
  std::string names;
  for (ElemType d : allowed) {
    if (t.dtype == d) return;
    if (!names.empty()) names += " or ";
    names += elem_type_name(d);
  }
  fail(op, std::string(what) + " is " + shape_str(t) + "; expected dtype " + names);
}

void check_shape(std::string_view op, std::string_view what, const TensorView& t, std::int64_t rows,
                 std::int64_t cols) {
  if (t.rows != rows || t.cols != cols) {
    fail(op, std::string(what) + " is " + shape_str(t) + "; expected [" + std::to_string(rows) + ", " +
                 std::to_string(cols) + "]");
  }
}

void check_gemm(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options) {
  check_dtype("gemm", "A", a, {ElemType::f32});
  check_dtype("gemm", "W", w, {ElemType::f32, ElemType::bf16});
  check_dtype("gemm", "C", c, {ElemType::f32});
  if (a.cols != w.cols) fail("gemm", "A is " + shape_str(a) + " but W is " + shape_str(w) + " (inner dims differ)");
  check_shape("gemm", "C", c, a.rows, w.rows);
  if (options.bias != nullptr) {
    check_dtype("gemm", "bias", *options.bias, {ElemType::f32, ElemType::bf16});
    check_shape("gemm", "bias", *options.bias, 1, w.rows);
  }
}

void check_kv_cache(std::string_view op, const KvCacheView& cache) {
  if (cache.k == nullptr || cache.v == nullptr || cache.num_blocks <= 0 || cache.block_size <= 0 ||
      cache.kv_heads <= 0 || cache.head_dim <= 0) {
    fail(op, "KV cache view is empty or has a non-positive dimension (blocks " + std::to_string(cache.num_blocks) +
                 ", block size " + std::to_string(cache.block_size) + ", kv heads " +
                 std::to_string(cache.kv_heads) + ", head dim " + std::to_string(cache.head_dim) + ")");
  }
}

void check_attention(const TensorView& q, const KvCacheView& cache, std::span<const SeqAttention> seqs,
                     const AttentionShape& shape, const TensorView& out) {
  constexpr std::string_view op = "paged_attention";
  check_kv_cache(op, cache);
  if (shape.num_heads <= 0 || shape.num_kv_heads <= 0 || shape.num_heads % shape.num_kv_heads != 0) {
    fail(op, "num_heads " + std::to_string(shape.num_heads) + " must be a positive multiple of num_kv_heads " +
                 std::to_string(shape.num_kv_heads));
  }
  if (shape.num_kv_heads != cache.kv_heads || shape.head_dim != cache.head_dim) {
    fail(op, "shape has " + std::to_string(shape.num_kv_heads) + " kv heads of dim " +
                 std::to_string(shape.head_dim) + " but the cache has " + std::to_string(cache.kv_heads) +
                 " of dim " + std::to_string(cache.head_dim));
  }
  const std::int64_t width = static_cast<std::int64_t>(shape.num_heads) * shape.head_dim;
  check_dtype(op, "q", q, {ElemType::f32});
  check_dtype(op, "out", out, {ElemType::f32});
  check_shape(op, "q", q, q.rows, width);
  check_shape(op, "out", out, q.rows, width);
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const SeqAttention& s = seqs[i];
    const std::string who = "sequence " + std::to_string(i);
    if (s.num_query < 0 || s.query_start < 0 || s.query_start + s.num_query > q.rows) {
      fail(op, who + " queries [" + std::to_string(s.query_start) + ", +" + std::to_string(s.num_query) +
                   ") fall outside q's " + std::to_string(q.rows) + " rows");
    }
    if (s.context_len < s.num_query) {
      fail(op, who + " has context_len " + std::to_string(s.context_len) + " < num_query " +
                   std::to_string(s.num_query));
    }
    const std::int64_t blocks = (static_cast<std::int64_t>(s.context_len) + cache.block_size - 1) / cache.block_size;
    if (static_cast<std::int64_t>(s.block_table.size()) < blocks) {
      fail(op, who + " needs " + std::to_string(blocks) + " blocks for " + std::to_string(s.context_len) +
                   " tokens but its block table has " + std::to_string(s.block_table.size()));
    }
    for (std::int64_t b = 0; b < blocks; ++b) {
      if (s.block_table[b] < 0 || s.block_table[b] >= cache.num_blocks) {
        fail(op, who + " block table entry " + std::to_string(b) + " = " + std::to_string(s.block_table[b]) +
                     " is outside the cache's " + std::to_string(cache.num_blocks) + " blocks");
      }
    }
  }
}

}  // namespace twin
