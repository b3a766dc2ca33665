// The index arithmetic the CUDA kernels use (engine/backend/paged_index.hpp),
// checked on the CPU: these tests run everywhere, GPU or not.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/backend/paged_index.hpp"

using namespace twin::paged;

TEST_CASE("slot_of follows the block table: block_id * block_size + offset") {
  const std::vector<std::int32_t> table = {7, 2, 9};
  CHECK(slot_of(table.data(), 4, 0) == 28);
  CHECK(slot_of(table.data(), 4, 3) == 31);
  CHECK(slot_of(table.data(), 4, 4) == 8);
  CHECK(slot_of(table.data(), 4, 11) == 39);
  CHECK(slot_of(table.data(), 1, 2) == 9);  // token-level KV
  // Large ids do not overflow 32 bits.
  const std::vector<std::int32_t> big = {1 << 30};
  CHECK(slot_of(big.data(), 512, 511) == (std::int64_t{1} << 39) + 511);
}

TEST_CASE("kv_offset addresses [blocks, block_size, kv_heads, head_dim]") {
  CHECK(kv_offset(0, 8, 128, 0) == 0);
  CHECK(kv_offset(0, 8, 128, 3) == 3 * 128);
  CHECK(kv_offset(5, 8, 128, 2) == (5 * 8 + 2) * 128);
  CHECK(kv_offset(std::int64_t{1} << 28, 8, 128, 7) == ((std::int64_t{1} << 28) * 8 + 7) * 128);
}

TEST_CASE("query positions and the keys a query sees, with and without a sliding window") {
  CHECK(blocks_for(0, 16) == 0);
  CHECK(blocks_for(1, 16) == 1);
  CHECK(blocks_for(16, 16) == 1);
  CHECK(blocks_for(17, 16) == 2);
  // A chunk of 5 new tokens after 10 cached ones: positions 10..14.
  CHECK(query_position(15, 5, 0) == 10);
  CHECK(query_position(15, 5, 4) == 14);
  CHECK(query_position(1, 1, 0) == 0);  // first decode of a 1-token prompt
  CHECK(first_key(14, 0) == 0);
  CHECK(first_key(14, 4) == 11);  // keys 11..14: exactly the window
  CHECK(first_key(2, 4) == 0);
  CHECK(first_key(3, 4) == 0);
  CHECK(first_key(4, 4) == 1);
}

TEST_CASE("split-K partitions cover the keys exactly once, in order") {
  for (std::int32_t first : {0, 3, 100}) {
    for (std::int32_t count : {1, 2, 255, 256, 257, 700, 1024}) {
      for (std::int32_t size : {1, 64, 256}) {
        const std::int32_t parts = num_partitions(count, size);
        CHECK(parts == (count + size - 1) / size);
        std::int32_t next = first;
        for (std::int32_t p = 0; p < parts; ++p) {
          const KeyRange r = partition_range(first, count, size, p);
          CHECK(r.begin == next);
          CHECK(r.end > r.begin);
          CHECK(r.end - r.begin <= size);
          next = r.end;
        }
        CHECK(next == first + count);
        // Partitions past the last (the grid is sized for the longest row) are empty.
        const KeyRange past = partition_range(first, count, size, parts);
        CHECK(past.begin >= past.end);
        const KeyRange far = partition_range(first, count, size, parts + 5);
        CHECK(far.begin >= far.end);
      }
    }
  }
  CHECK(num_partitions(0, 256) == 0);
}

TEST_CASE("a prefill tile reads every key its rows see, and each row sees exactly its own keys") {
  for (std::int32_t window : {0, 1, 4, 37}) {
    for (std::int32_t position : {0, 1, 5, 36, 100}) {
      for (std::int32_t count : {1, 4, 16}) {
        const KeyRange keys = tile_keys(position, count, window);
        for (std::int32_t row = 0; row < count; ++row) {
          const std::int32_t pos = position + row;
          std::int32_t seen = 0;
          for (std::int32_t key = keys.begin; key < keys.end; ++key) seen += key_visible(key, pos, window) ? 1 : 0;
          // Nothing the row sees lies outside the tile's range.
          CHECK(first_key(pos, window) >= keys.begin);
          CHECK(pos < keys.end);
          const std::int32_t expect = window > 0 ? std::min(window, pos + 1) : pos + 1;
          CHECK(seen == expect);
        }
        CHECK(keys.end == position + count);  // the last row's own key closes the range
      }
    }
  }
  CHECK_FALSE(key_visible(6, 5, 0));  // causal
  CHECK(key_visible(5, 5, 0));
  CHECK_FALSE(key_visible(1, 5, 4));  // outside the window (keys 2..5)
  CHECK(key_visible(2, 5, 4));
}

#include "base/error.hpp"
#include "engine/backend/cuda/memory_plan.hpp"

TEST_CASE("the KV memory plan gives the cache what is left of the utilization budget") {
  const std::int64_t gib = std::int64_t{1} << 30;
  // 80 GiB device, 1 GiB in use, 16 GiB weights, 2 GiB workspace, 0.9: 72 - 19 = 53 GiB of KV.
  const twin::KvMemoryPlan p = twin::plan_kv_memory(80 * gib, 79 * gib, 0.9, 16 * gib, 2 * gib, 2 << 20);
  CHECK(p.budget_bytes == static_cast<std::int64_t>(80.0 * gib * 0.9));
  CHECK(p.kv_bytes == p.budget_bytes - 19 * gib);
  CHECK(p.num_blocks == p.kv_bytes / (2 << 20));
  CHECK_THROWS_AS(twin::plan_kv_memory(80 * gib, 80 * gib, 0.0, 0, 0, 1), twin::UsageError);
  CHECK_THROWS_AS(twin::plan_kv_memory(80 * gib, 80 * gib, 1.5, 0, 0, 1), twin::UsageError);
  CHECK_THROWS_WITH(twin::plan_kv_memory(16 * gib, 16 * gib, 0.9, 16 * gib, gib, 1 << 20),
                    Catch::Contains("no KV block") && Catch::Contains("weights"));
}

TEST_CASE("the device sampler's sort space: whole rows per chunk, at least one, doubled") {
  // Llama 3's vocabulary: 130 rows of 128,256 fit in a chunk of 2^24 pairs.
  CHECK(twin::sampling_chunk_rows(128256, 256) == 130);
  CHECK(twin::sampling_chunk_rows(128256, 16) == 16);
  CHECK(twin::sampling_chunk_rows(std::int64_t{1} << 25, 4) == 1);  // a row larger than a chunk still sorts
  CHECK(twin::sampling_workspace_bytes(128256, 256) == 2 * 130 * 128256 * twin::kSamplingBytesPerPair);
  CHECK(twin::sampling_workspace_bytes(32000, 1) == 2 * 32000 * twin::kSamplingBytesPerPair);
}

TEST_CASE("packed GQA rows are query-major with the group heads inside, tiles cover them and padding takes the last position") {
  for (std::int32_t group : {1, 4, 8}) {
    for (std::int32_t nq : {1, 5, 16, 100}) {
      const std::int32_t total = nq * group;
      std::vector<int> seen(static_cast<std::size_t>(total), 0);
      const std::int32_t tiles = packed_tiles(nq, group, 64);
      CHECK(tiles == (total + 63) / 64);
      for (std::int32_t t = 0; t < tiles; ++t) {
        for (std::int32_t r = 0; r < 64; ++r) {
          const std::int32_t packed = t * 64 + r;
          const std::int32_t pos = packed_position(1000, packed, total, group);
          if (packed >= total) {
            CHECK(pos == 1000 + nq - 1);  // padding: the chunk's last position
            continue;
          }
          const PackedRow pr = packed_row(packed, group);
          CHECK(pr.query * group + pr.head == packed);
          CHECK(pr.head < group);
          CHECK(pos == 1000 + pr.query);
          seen[static_cast<std::size_t>(pr.query * group + pr.head)] += 1;
        }
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    }
  }
}

TEST_CASE("key_tile_unmasked holds exactly when every key of the tile is visible to every row of the range") {
  for (std::int32_t window : {0, 1, 7, 64, 100}) {
    for (std::int32_t lo : {0, 3, 63, 64, 200}) {
      for (std::int32_t span : {0, 1, 15, 64}) {
        const std::int32_t hi = lo + span;
        for (std::int32_t kb = 0; kb <= hi; kb += 5) {
          for (std::int32_t n : {1, 16, 64}) {
            bool all = true;
            for (std::int32_t pos = lo; pos <= hi; ++pos) {
              for (std::int32_t key = kb; key < kb + n; ++key) all = all && key_visible(key, pos, window);
            }
            CHECK(key_tile_unmasked(kb, n, lo, hi, window) == all);
          }
        }
      }
    }
  }
}
