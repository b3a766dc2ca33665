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
  return (tokens + block_size - 1) / block_size;
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
  return count <= 0 ? 0 : (count + partition_size - 1) / partition_size;
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

}  // namespace twin::paged
