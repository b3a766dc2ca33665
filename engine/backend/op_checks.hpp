#pragma once
// Argument checks shared by every backend, so that a shape or dtype mistake
// is the same twin::Error (naming the op and both shapes) on each of them.
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "engine/backend/op_args.hpp"
#include "engine/backend/tensor.hpp"

namespace twin {

std::string shape_str(const TensorView& t);  // "[rows, cols] dtype"

void check_view(std::string_view op, std::string_view what, const TensorView& t);
void check_dtype(std::string_view op, std::string_view what, const TensorView& t,
                 std::initializer_list<ElemType> allowed);
void check_shape(std::string_view op, std::string_view what, const TensorView& t,
                 std::int64_t rows, std::int64_t cols);

void check_gemm(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options);
void check_kv_cache(std::string_view op, const KvCacheView& cache);
void check_attention(const TensorView& q, const KvCacheView& cache, std::span<const SeqAttention> seqs,
                     const AttentionShape& shape, const TensorView& out);

}  // namespace twin
