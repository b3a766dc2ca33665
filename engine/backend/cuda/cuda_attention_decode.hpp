#pragma once
// Launchers of the GQA decode attention kernel (cuda_attention_decode.cu):
// decodes and short chunks, one block per (row, KV head, key partition)
// for all the query heads of the group. Plain C++ declarations.
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_kernels.hpp"

namespace twin::cuda {

// Whether the decode kernel takes this shape: head_dim a multiple of 8 up
// to 256, and both caches 16-byte aligned (its vector loads). Otherwise the
// caller uses launch_paged_attention (cuda_attention.cu).
bool attention_decode_supported(int head_dim, const void* k_cache, const void* v_cache);

// Blocks per row and partition: KV heads x head blocks (a GQA group of more
// than 8 query heads takes several), for choosing the partition size.
int attention_decode_units_per_row(int num_heads, int kv_heads);

// Like launch_paged_attention: p.rows / num_rows / partition_size /
// max_partitions and, when max_partitions > 1, part_acc / part_ml laid out
// as [rows, num_heads, max_partitions, head_dim] and [..., 2]. The (m, l)
// partials are in base 2 and only this file's merge reads them.
void launch_paged_attention_decode(const AttnParams& p, cudaStream_t stream);

}  // namespace twin::cuda
