#pragma once
// Argument checks shared by every backend, so that a shape or dtype mistake
// is the same twin::Error (naming the op and both shapes) on each of them.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "base/types.hpp"
#include "engine/backend/op_args.hpp"
#include "engine/backend/tensor.hpp"

namespace twin {

// ---- building blocks --------------------------------------------------------
// "[rows, cols] dtype", as the messages print a view.
std::string shape_str(const TensorView& t);
// Non-negative sizes, row_stride >= cols, and data unless the view is empty.
void check_view(std::string_view op, std::string_view what, const TensorView& t);
// check_view, then t's dtype is one of allowed.
void check_dtype(std::string_view op, std::string_view what, const TensorView& t,
                 std::initializer_list<ElemType> allowed);
// t is [rows, cols].
void check_shape(std::string_view op, std::string_view what, const TensorView& t, std::int64_t rows,
                 std::int64_t cols);
// Pointers set and every dimension positive.
void check_kv_cache(std::string_view op, const KvCacheView& cache);
// Whether two views share an element (strided views of one buffer, such as
// the q and k column slices of a fused qkv, do not). Views of different
// strides or element sizes whose byte ranges meet count as sharing.
bool views_overlap(const TensorView& a, const TensorView& b);
// An op's output must not share elements with an input it reads, or the
// result depends on the order the backend happens to work in. With
// same_allowed, the very same view (in place) is fine.
void check_disjoint(std::string_view op, std::string_view out_name, const TensorView& out, std::string_view in_name,
                    const TensorView& in, bool same_allowed = false);

// ---- memory -----------------------------------------------------------------
// src and dst f32, bf16 or f16 and of one shape.
void check_copy(const TensorView& src, const TensorView& dst);
// dst f32.
void check_fill(const TensorView& dst);

// ---- dense ops --------------------------------------------------------------
// A, C f32; W and bias f32 or bf16; C [A.rows, W.rows]; bias [1, W.rows].
void check_gemm(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options);
// table f32, bf16 or f16; out f32 [ids, table.cols]; every id a row of table.
void check_embedding(std::span<const TokenId> ids, const TensorView& table, const TensorView& out);
// src, dst f32; dst [rows, src.cols]; every row index a row of src.
void check_gather_rows(const TensorView& src, std::span<const std::int32_t> rows, const TensorView& dst);
// x, y f32 of one shape.
void check_add(const TensorView& x, const TensorView& y);
// x, out f32 of one shape; weight [1, x.cols] f32, bf16 or f16.
void check_rmsnorm(const TensorView& x, const TensorView& weight, const TensorView& out);
// check_rmsnorm's rules with residual as x, and delta f32 of residual's shape.
void check_add_rmsnorm(const TensorView& residual, const TensorView& delta, const TensorView& weight,
                       const TensorView& out);
// An even rotary_dim <= head_dim; q, k f32 with one row per position and whole heads.
void check_rotary(const TensorView& q, const TensorView& k, std::span<const std::int32_t> positions,
                  const RopeConfig& rope);
// gate_up, out f32; gate_up [out.rows, 2 * out.cols].
void check_silu_and_mul(const TensorView& gate_up, const TensorView& out);

// ---- paged KV and attention (which KV cache dtypes it stores, a backend checks itself)
// A usable cache; k, v f32 [slots, kv_heads * head_dim]; every slot below the cache's (negative = padding).
void check_kv_write(const TensorView& k, const TensorView& v, const KvCacheView& cache,
                    std::span<const std::int64_t> slots);
// Heads a multiple of the cache's kv heads; q, out f32; each sequence's queries and block table in range.
void check_attention(const TensorView& q, const KvCacheView& cache, std::span<const SeqAttention> seqs,
                     const AttentionShape& shape, const TensorView& out);
// Two usable caches of one dtype and block geometry; every pair's blocks in range.
void check_copy_blocks(const KvCacheView& src, const KvCacheView& dst, std::span<const BlockCopy> pairs);

// ---- mixture of experts -----------------------------------------------------
// logits f32; top_k in [1, logits.cols]; ids i32 and weights f32 [logits.rows, top_k].
void check_moe_topk(const TensorView& router_logits, std::int32_t top_k, const TensorView& topk_ids,
                    const TensorView& topk_weights);
// x, out f32 [T, H]; ids i32 and weights f32 [T, top_k]; as many gate_up [2I, H] as down [H, I], f32 or
// bf16, or i8 with a [1, rows] f32 scale each (the scale spans empty or as long as the weights').
void check_moe_experts(const TensorView& x, const TensorView& topk_ids, const TensorView& topk_weights,
                       const ExpertWeights& experts, const TensorView& out);
// moe_experts' ids once in host memory (a device backend downloads them first): each below experts.
void check_moe_expert_ids(const TensorView& host_ids, std::size_t experts);

// ---- sampling ---------------------------------------------------------------
// logits f32; one parameter set and one output per row.
void check_sample(const TensorView& logits, std::span<const SamplingParams> params,
                  std::span<const TokenId> out_tokens);

}  // namespace twin
