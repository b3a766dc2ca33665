#include "engine/backend/op_checks.hpp"

#include <cmath>

#include <string>

#include "base/error.hpp"

namespace twin {

namespace {

[[noreturn]] void fail(std::string_view op, const std::string& message) {
  throw Error(std::string(op) + ": " + message);
}

// Shared so that rmsnorm and add_rmsnorm reject a bad weight or out alike.
void check_norm_weight_out(std::string_view op, const TensorView& x, const TensorView& weight, const TensorView& out) {
  check_dtype(op, "weight", weight, {ElemType::f32, ElemType::bf16, ElemType::f16});
  check_dtype(op, "out", out, {ElemType::f32});
  check_shape(op, "weight", weight, 1, x.cols);
  check_shape(op, "out", out, x.rows, x.cols);
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

bool views_overlap(const TensorView& a, const TensorView& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto ea = static_cast<std::int64_t>(elem_bytes(a.dtype)), eb = static_cast<std::int64_t>(elem_bytes(b.dtype));
  const auto* pa = static_cast<const char*>(a.data);
  const auto* pb = static_cast<const char*>(b.data);
  const char* a_end = pa + ((a.rows - 1) * a.row_stride + a.cols) * ea;
  const char* b_end = pb + ((b.rows - 1) * b.row_stride + b.cols) * eb;
  if (a_end <= pb || b_end <= pa) return false;
  const std::int64_t offset = pb - pa;  // bytes
  if (ea != eb || a.row_stride != b.row_stride || offset % ea != 0) return true;
  // Same layout: b's element (r, c) is a's linear element d + r * s + c.
  const std::int64_t s = a.row_stride, d = offset / ea;
  const std::int64_t row = d >= 0 ? d / s : -((-d + s - 1) / s);
  const std::int64_t col = d - row * s;  // in [0, s)
  auto meets = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    return r0 < a.rows && r1 > 0 && c0 < a.cols && c1 > 0 && r0 < r1 && c0 < c1;
  };
  if (col + b.cols <= s) return meets(row, row + b.rows, col, col + b.cols);
  // b's rows wrap past a's row end: the tail continues on the next row.
  return meets(row, row + b.rows, col, s) || meets(row + 1, row + 1 + b.rows, 0, col + b.cols - s);
}

void check_disjoint(std::string_view op, std::string_view out_name, const TensorView& out, std::string_view in_name,
                    const TensorView& in, bool same_allowed) {
  const bool same = out.data == in.data && out.dtype == in.dtype && out.rows == in.rows && out.cols == in.cols &&
                    out.row_stride == in.row_stride;
  if (same && same_allowed) return;
  if (views_overlap(out, in)) {
    fail(op, std::string(out_name) + " " + shape_str(out) + " shares memory with " + std::string(in_name) + " " +
                 shape_str(in) + (same_allowed ? "; expected the same view (in place) or disjoint ones"
                                               : "; expected disjoint buffers"));
  }
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

void check_copy(const TensorView& src, const TensorView& dst) {
  check_dtype("copy", "src", src, {ElemType::f32, ElemType::bf16, ElemType::f16});
  check_dtype("copy", "dst", dst, {ElemType::f32, ElemType::bf16, ElemType::f16});
  check_shape("copy", "dst", dst, src.rows, src.cols);
  check_disjoint("copy", "dst", dst, "src", src);
}

void check_fill(const TensorView& dst) { check_dtype("fill", "dst", dst, {ElemType::f32}); }

void check_gemm(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options) {
  check_dtype("gemm", "A", a, {ElemType::f32});
  check_dtype("gemm", "W", w, {ElemType::f32, ElemType::bf16, ElemType::i8, ElemType::f8e4m3});
  const bool scaled = w.dtype == ElemType::i8 || w.dtype == ElemType::f8e4m3;
  if (scaled != (options.w_scales != nullptr)) {
    fail("gemm", scaled ? "W is " + std::string(elem_type_name(w.dtype)) + " but no w_scales are given"
                        : "w_scales are given for a float W");
  }
  if (options.w_scales != nullptr) {
    check_dtype("gemm", "w_scales", *options.w_scales, {ElemType::f32});
    check_shape("gemm", "w_scales", *options.w_scales, 1, w.rows);
  }
  check_dtype("gemm", "C", c, {ElemType::f32});
  if (a.cols != w.cols) fail("gemm", "A is " + shape_str(a) + " but W is " + shape_str(w) + " (inner dims differ)");
  check_shape("gemm", "C", c, a.rows, w.rows);
  if (options.bias != nullptr) {
    check_dtype("gemm", "bias", *options.bias, {ElemType::f32, ElemType::bf16});
    check_shape("gemm", "bias", *options.bias, 1, w.rows);
    check_disjoint("gemm", "C", c, "bias", *options.bias);
  }
  check_disjoint("gemm", "C", c, "A", a);
  check_disjoint("gemm", "C", c, "W", w);
}

void check_embedding(std::span<const TokenId> ids, const TensorView& table, const TensorView& out) {
  check_dtype("embedding", "table", table, {ElemType::f32, ElemType::bf16, ElemType::f16});
  check_dtype("embedding", "out", out, {ElemType::f32});
  check_shape("embedding", "out", out, static_cast<std::int64_t>(ids.size()), table.cols);
  check_disjoint("embedding", "out", out, "table", table);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= table.rows) {
      fail("embedding", "token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                            " is outside the table's " + std::to_string(table.rows) + " rows");
    }
  }
}

void check_gather_rows(const TensorView& src, std::span<const std::int32_t> rows, const TensorView& dst) {
  check_dtype("gather_rows", "src", src, {ElemType::f32});
  check_dtype("gather_rows", "dst", dst, {ElemType::f32});
  check_shape("gather_rows", "dst", dst, static_cast<std::int64_t>(rows.size()), src.cols);
  check_disjoint("gather_rows", "dst", dst, "src", src);
  for (const std::int32_t r : rows) {
    if (r < 0 || r >= src.rows) {
      fail("gather_rows", "row " + std::to_string(r) + " is outside src's " + std::to_string(src.rows) + " rows");
    }
  }
}

void check_add(const TensorView& x, const TensorView& y) {
  check_dtype("add", "x", x, {ElemType::f32});
  check_dtype("add", "y", y, {ElemType::f32});
  check_shape("add", "y", y, x.rows, x.cols);
  check_disjoint("add", "x", x, "y", y, true);
}

void check_rmsnorm(const TensorView& x, const TensorView& weight, const TensorView& out) {
  check_dtype("rmsnorm", "x", x, {ElemType::f32});
  check_norm_weight_out("rmsnorm", x, weight, out);
  check_disjoint("rmsnorm", "out", out, "x", x, true);
}

void check_add_rmsnorm(const TensorView& residual, const TensorView& delta, const TensorView& weight,
                       const TensorView& out) {
  check_dtype("add_rmsnorm", "residual", residual, {ElemType::f32});
  check_dtype("add_rmsnorm", "delta", delta, {ElemType::f32});
  check_shape("add_rmsnorm", "delta", delta, residual.rows, residual.cols);
  check_norm_weight_out("add_rmsnorm", residual, weight, out);
  check_disjoint("add_rmsnorm", "residual", residual, "delta", delta, true);
  check_disjoint("add_rmsnorm", "out", out, "residual", residual, true);
  check_disjoint("add_rmsnorm", "out", out, "delta", delta, true);
}

void check_rotary(const TensorView& q, const TensorView& k, std::span<const std::int32_t> positions,
                  const RopeConfig& rope) {
  const std::int32_t hd = rope.head_dim;
  const std::int32_t rot = rope.rotary_dim > 0 ? rope.rotary_dim : hd;
  if (hd <= 0 || rot > hd || rot % 2 != 0) {
    fail("rotary", "head_dim " + std::to_string(hd) + " / rotary_dim " + std::to_string(rot) +
                       " must be positive with an even rotary_dim <= head_dim");
  }
  if (!(rope.theta > 0.0f) || !std::isfinite(rope.theta)) fail("rotary", "theta must be a positive number");
  if (rope.scaling != RopeScaling::none && !(rope.factor > 0.0 && std::isfinite(rope.factor))) {
    fail("rotary", "the scaling factor must be a positive number, got " + std::to_string(rope.factor));
  }
  if (rope.scaling == RopeScaling::llama3 &&
      !(rope.low_freq_factor > 0.0 && rope.high_freq_factor > rope.low_freq_factor &&
        std::isfinite(rope.high_freq_factor) && rope.original_max_position > 0.0 &&
        std::isfinite(rope.original_max_position))) {
    fail("rotary", "llama3 scaling needs 0 < low_freq_factor < high_freq_factor and a positive "
                   "original_max_position, got " + std::to_string(rope.low_freq_factor) + ", " +
                   std::to_string(rope.high_freq_factor) + ", " + std::to_string(rope.original_max_position));
  }
  check_dtype("rotary", "q", q, {ElemType::f32});
  check_dtype("rotary", "k", k, {ElemType::f32});
  const auto tokens = static_cast<std::int64_t>(positions.size());
  if (q.rows != tokens || k.rows != tokens || q.cols % hd != 0 || k.cols % hd != 0) {
    fail("rotary", "q " + shape_str(q) + " and k " + shape_str(k) + " must have " + std::to_string(tokens) +
                       " rows (one per position) and a multiple of head_dim " + std::to_string(hd) + " columns");
  }
}

void check_silu_and_mul(const TensorView& gate_up, const TensorView& out) {
  check_dtype("silu_and_mul", "gate_up", gate_up, {ElemType::f32});
  check_dtype("silu_and_mul", "out", out, {ElemType::f32});
  check_shape("silu_and_mul", "gate_up", gate_up, out.rows, out.cols * 2);
  check_disjoint("silu_and_mul", "out", out, "gate_up", gate_up);
}

void check_kv_cache(std::string_view op, const KvCacheView& cache) {
  if (cache.k == nullptr || cache.v == nullptr || cache.num_blocks <= 0 || cache.block_size <= 0 ||
      cache.kv_heads <= 0 || cache.head_dim <= 0) {
    fail(op, "KV cache view is empty or has a non-positive dimension (blocks " + std::to_string(cache.num_blocks) +
                 ", block size " + std::to_string(cache.block_size) + ", kv heads " +
                 std::to_string(cache.kv_heads) + ", head dim " + std::to_string(cache.head_dim) + ")");
  }
  if (!(cache.k_scale > 0.0f) || !(cache.v_scale > 0.0f) || !std::isfinite(cache.k_scale) ||
      !std::isfinite(cache.v_scale)) {
    fail(op, "KV cache scales must be finite and positive (k_scale " + std::to_string(cache.k_scale) + ", v_scale " +
                 std::to_string(cache.v_scale) + ")");
  }
  if (cache.dtype != ElemType::f8e4m3 && (cache.k_scale != 1.0f || cache.v_scale != 1.0f)) {
    fail(op, "KV cache scales other than 1 are for an fp8_e4m3 cache, not " + std::string(elem_type_name(cache.dtype)));
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
  check_disjoint(op, "out", out, "q", q);
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

void check_kv_write(const TensorView& k, const TensorView& v, const KvCacheView& cache,
                    std::span<const std::int64_t> slots) {
  check_kv_cache("kv_write", cache);
  check_dtype("kv_write", "k", k, {ElemType::f32});
  check_dtype("kv_write", "v", v, {ElemType::f32});
  const std::int64_t width = cache.slot_elems();
  check_shape("kv_write", "k", k, static_cast<std::int64_t>(slots.size()), width);
  check_shape("kv_write", "v", v, static_cast<std::int64_t>(slots.size()), width);
  const std::int64_t num_slots = cache.num_blocks * cache.block_size;
  for (std::size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] >= num_slots) {
      fail("kv_write", "slot " + std::to_string(slots[t]) + " of token " + std::to_string(t) +
                           " is outside the cache's " + std::to_string(num_slots) + " slots");
    }
  }
}

void check_copy_blocks(const KvCacheView& src, const KvCacheView& dst, std::span<const BlockCopy> pairs) {
  check_kv_cache("copy_blocks", src);
  check_kv_cache("copy_blocks", dst);
  if (src.dtype != dst.dtype || src.block_size != dst.block_size || src.kv_heads != dst.kv_heads ||
      src.head_dim != dst.head_dim || src.k_scale != dst.k_scale || src.v_scale != dst.v_scale) {
    fail("copy_blocks", "source and destination caches differ in dtype, block geometry or scales");
  }
  for (const BlockCopy& p : pairs) {
    if (p.src < 0 || p.src >= src.num_blocks || p.dst < 0 || p.dst >= dst.num_blocks) {
      fail("copy_blocks", "pair " + std::to_string(p.src) + " -> " + std::to_string(p.dst) +
                              " is outside the caches' " + std::to_string(src.num_blocks) + " / " +
                              std::to_string(dst.num_blocks) + " blocks");
    }
  }
}

void check_moe_topk(const TensorView& router_logits, std::int32_t top_k, const TensorView& topk_ids,
                    const TensorView& topk_weights) {
  check_dtype("moe_topk", "router_logits", router_logits, {ElemType::f32});
  check_dtype("moe_topk", "topk_ids", topk_ids, {ElemType::i32});
  check_dtype("moe_topk", "topk_weights", topk_weights, {ElemType::f32});
  if (top_k <= 0 || top_k > router_logits.cols) {
    fail("moe_topk", "top_k " + std::to_string(top_k) + " must be in [1, " + std::to_string(router_logits.cols) + "]");
  }
  check_shape("moe_topk", "topk_ids", topk_ids, router_logits.rows, top_k);
  check_shape("moe_topk", "topk_weights", topk_weights, router_logits.rows, top_k);
}

void check_moe_experts(const TensorView& x, const TensorView& topk_ids, const TensorView& topk_weights,
                       const ExpertWeights& experts, const TensorView& out) {
  const std::span<const TensorView> gate_up = experts.gate_up, down = experts.down;
  constexpr std::string_view op = "moe_experts";
  check_dtype(op, "x", x, {ElemType::f32});
  check_dtype(op, "out", out, {ElemType::f32});
  check_shape(op, "out", out, x.rows, x.cols);
  check_dtype(op, "topk_ids", topk_ids, {ElemType::i32});
  check_dtype(op, "topk_weights", topk_weights, {ElemType::f32});
  check_shape(op, "topk_ids", topk_ids, x.rows, topk_ids.cols);
  check_shape(op, "topk_weights", topk_weights, x.rows, topk_ids.cols);
  if (gate_up.size() != down.size() || gate_up.empty()) {
    fail(op, std::to_string(gate_up.size()) + " gate_up and " + std::to_string(down.size()) +
                 " down weights; expected the same non-zero count");
  }
  const bool scaled = !experts.gate_up_scales.empty() || !experts.down_scales.empty();
  if (scaled && (experts.gate_up_scales.size() != gate_up.size() || experts.down_scales.size() != down.size())) {
    fail(op, std::to_string(experts.gate_up_scales.size()) + " gate_up and " +
                 std::to_string(experts.down_scales.size()) + " down scales for " + std::to_string(gate_up.size()) +
                 " experts; expected one each or none");
  }
  const std::int64_t inter = gate_up[0].rows / 2;
  for (std::size_t e = 0; e < gate_up.size(); ++e) {
    // Built by appending (GCC 12 reports a false -Wrestrict for "name" + string).
    auto at = [e](const char* what) { return std::string(what) + "[" + std::to_string(e) + "]"; };
    if (scaled) {
      check_dtype(op, at("gate_up"), gate_up[e], {ElemType::i8});
      check_dtype(op, at("down"), down[e], {ElemType::i8});
      check_dtype(op, at("gate_up_scales"), experts.gate_up_scales[e], {ElemType::f32});
      check_dtype(op, at("down_scales"), experts.down_scales[e], {ElemType::f32});
      check_shape(op, at("gate_up_scales"), experts.gate_up_scales[e], 1, 2 * inter);
      check_shape(op, at("down_scales"), experts.down_scales[e], 1, x.cols);
    } else {
      check_dtype(op, at("gate_up"), gate_up[e], {ElemType::f32, ElemType::bf16});
      check_dtype(op, at("down"), down[e], {ElemType::f32, ElemType::bf16});
    }
    check_shape(op, at("gate_up"), gate_up[e], 2 * inter, x.cols);
    check_shape(op, at("down"), down[e], x.cols, inter);
  }
  check_disjoint(op, "out", out, "x", x);
}

void check_moe_expert_ids(const TensorView& host_ids, std::size_t experts) {
  for (std::int64_t t = 0; t < host_ids.rows; ++t) {
    const auto* ids = static_cast<const std::int32_t*>(host_ids.at(t));
    for (std::int64_t j = 0; j < host_ids.cols; ++j) {
      if (ids[j] < 0 || static_cast<std::size_t>(ids[j]) >= experts) {
        fail("moe_experts", "expert id " + std::to_string(ids[j]) + " of token " + std::to_string(t) +
                                " is outside the " + std::to_string(experts) + " experts");
      }
    }
  }
}

void check_sample(const TensorView& logits, std::span<const SamplingParams> params,
                  std::span<const TokenId> out_tokens) {
  check_dtype("sample", "logits", logits, {ElemType::f32});
  if (static_cast<std::int64_t>(params.size()) != logits.rows || out_tokens.size() != params.size()) {
    fail("sample", "logits " + shape_str(logits) + " with " + std::to_string(params.size()) + " parameter sets and " +
                       std::to_string(out_tokens.size()) + " outputs; expected one per row");
  }
}

}  // namespace twin
