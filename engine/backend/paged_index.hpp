#pragma once
// Paged-KV index arithmetic shared by host code and CUDA kernels: where a
// token's K/V row lives, which keys a query may see, and how a long context
// is split into partitions for split-K attention or read in tiles shared by
// a prefill chunk's rows. Plain integer functions on
// scalars and raw pointers (no std containers), so nvcc compiles them for the
// device and the CPU tests check the same code (tests/backend_cuda).
#include <cstdint>

#if defined(__CUDACC__)
#define TWIN_HOST_DEVICE __host__ __device__
#else
#define TWIN_HOST_DEVICE
#endif

namespace twin::paged {

// Slot of the token at `position` of a sequence whose blocks are `block_table`.
TWIN_HOST_DEVICE inline std::int64_t slot_of(const std::int32_t* block_table, std::int32_t block_size,
                                             std::int32_t position) {
  return static_cast<std::int64_t>(block_table[position / block_size]) * block_size + position % block_size;
}

// Element offset of (slot, kv_head, 0) in a [blocks, block_size, kv_heads, head_dim] cache.
TWIN_HOST_DEVICE inline std::int64_t kv_offset(std::int64_t slot, std::int32_t kv_heads, std::int32_t head_dim,
                                               std::int32_t kv_head) {
  return (slot * kv_heads + kv_head) * static_cast<std::int64_t>(head_dim);
}

// Blocks a context of `tokens` tokens spans.
TWIN_HOST_DEVICE inline std::int32_t blocks_for(std::int32_t tokens, std::int32_t block_size) {
  return static_cast<std::int32_t>((static_cast<std::int64_t>(tokens) + block_size - 1) / block_size);
}

// Absolute position of new token `query` of a sequence with `context_len`
// tokens of which the last `num_query` are new.
TWIN_HOST_DEVICE inline std::int32_t query_position(std::int32_t context_len, std::int32_t num_query,
                                                    std::int32_t query) {
  return context_len - num_query + query;
}

// First key position a query at `position` sees (0, or the window's start).
TWIN_HOST_DEVICE inline std::int32_t first_key(std::int32_t position, std::int32_t sliding_window) {
  const std::int32_t lo = position - sliding_window + 1;
  return sliding_window > 0 && lo > 0 ? lo : 0;
}

// Split-K: the keys [first, first + count) of one query are cut into
// partitions of `partition_size` keys; partition p covers
// [first + p * size, min(first + (p + 1) * size, first + count)).
TWIN_HOST_DEVICE inline std::int32_t num_partitions(std::int32_t count, std::int32_t partition_size) {
  // In 64 bits: a count near 2^31 must not overflow on the way.
  return count <= 0 ? 0
                    : static_cast<std::int32_t>((static_cast<std::int64_t>(count) + partition_size - 1) / partition_size);
}

struct KeyRange {
  std::int32_t begin = 0;
  std::int32_t end = 0;  // exclusive; begin >= end: empty
};

TWIN_HOST_DEVICE inline KeyRange partition_range(std::int32_t first, std::int32_t count, std::int32_t partition_size,
                                                 std::int32_t partition) {
  KeyRange r;
  r.begin = first + partition * partition_size;
  const std::int32_t end = r.begin + partition_size;
  const std::int32_t limit = first + count;
  r.end = end < limit ? end : limit;
  if (r.begin > limit) r.begin = limit;
  return r;
}

// Whether a query at `position` sees the key at `key`: causal, and inside
// the sliding window when there is one.
TWIN_HOST_DEVICE inline bool key_visible(std::int32_t key, std::int32_t position, std::int32_t sliding_window) {
  return key <= position && key >= first_key(position, sliding_window);
}

// The keys a tile of `count` consecutive query rows from `position` reads:
// from the first row's first key (a window's start only moves forward) to
// the last row's own key. Each row masks the keys of the range it does not see.
TWIN_HOST_DEVICE inline KeyRange tile_keys(std::int32_t position, std::int32_t count, std::int32_t sliding_window) {
  KeyRange r;
  r.begin = first_key(position, sliding_window);
  r.end = count > 0 ? position + count : r.begin;
  return r;
}

// Prefill on tensor cores (cuda_attention_mma.cu) packs the query heads of
// a GQA group into the rows of one tile, so a K/V tile read once serves the
// whole group: packed row = query * group + head_in_group. A sequence's
// chunk of num_query new tokens has num_query * group packed rows.
struct PackedRow {
  std::int32_t query = 0;  // new token index within the chunk
  std::int32_t head = 0;   // query head within the KV head's group
};

TWIN_HOST_DEVICE inline PackedRow packed_row(std::int32_t packed, std::int32_t group) {
  PackedRow r;
  r.query = packed / group;
  r.head = packed % group;
  return r;
}

// Tiles of `tile_rows` packed rows a chunk needs.
TWIN_HOST_DEVICE inline std::int32_t packed_tiles(std::int32_t num_query, std::int32_t group, std::int32_t tile_rows) {
  return (num_query * group + tile_rows - 1) / tile_rows;
}

// Position the tile row at `packed` computes with, its query being new token
// 0 at `position0`. Rows past the chunk's last (tile padding: computed, never
// stored) take the last row's position, so every row of a tile sees at least
// one key of the tile's range and its softmax sum is never zero.
TWIN_HOST_DEVICE inline std::int32_t packed_position(std::int32_t position0, std::int32_t packed, std::int32_t total,
                                                     std::int32_t group) {
  const std::int32_t last = total - 1;
  return position0 + (packed < last ? packed : last) / group;
}

// Whether every key of [kb, kb + n) is visible to every row whose position
// lies in [pos_lo, pos_hi]: below the earliest row's diagonal and inside the
// latest row's window. Such key tiles skip the per-element mask.
TWIN_HOST_DEVICE inline bool key_tile_unmasked(std::int32_t kb, std::int32_t n, std::int32_t pos_lo, std::int32_t pos_hi,
                                               std::int32_t sliding_window) {
  return kb + n - 1 <= pos_lo && kb >= first_key(pos_hi, sliding_window);
}

}  // namespace twin::paged
