// The pool's flat hash index against std::unordered_map: random inserts,
// finds and erases (with the backward shift across the table's end), duplicates
// refused, and probe runs kept whole by erases.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "engine/core/block_hash_index.hpp"

using namespace twin;

TEST_CASE("the block hash index agrees with a reference map over random churn") {
  BlockHashIndex index;
  std::unordered_map<BlockHash, BlockId> reference;
  std::mt19937_64 rng(7);
  // Few distinct keys, so erases and re-inserts hit present keys often; the
  // table grows to 1024 slots and its runs wrap around its end.
  std::uniform_int_distribution<std::uint64_t> key(0, 600);
  std::uniform_int_distribution<int> op(0, 2);
  for (int i = 0; i < 200000; ++i) {
    const BlockHash h = key(rng) * 0x100000001b3ull;  // spread, 0 included
    const BlockId b = static_cast<BlockId>(i % 100000);
    switch (op(rng)) {
      case 0:
        CHECK(index.insert(h, b) == reference.emplace(h, b).second);
        break;
      case 1:
        index.erase(h);
        reference.erase(h);
        break;
      default: {
        const auto it = reference.find(h);
        REQUIRE(index.find(h) == (it == reference.end() ? -1 : it->second));
      }
    }
    REQUIRE(index.size() == reference.size());
  }
  std::size_t seen = 0;
  index.for_each([&](BlockHash h, BlockId b) {
    ++seen;
    CHECK(reference.at(h) == b);
  });
  CHECK(seen == reference.size());
}

TEST_CASE("the block hash index keeps its probe runs findable after erases in their middle") {
  // 32 keys in its first 64 slots: at half load the table holds runs of
  // several entries; erasing every third key shifts the rest back.
  BlockHashIndex index;
  for (BlockHash k = 0; k < 32; ++k) REQUIRE(index.insert(k, static_cast<BlockId>(k)));
  for (BlockHash k = 0; k < 32; k += 3) index.erase(k);
  for (BlockHash k = 0; k < 32; ++k) CHECK(index.find(k) == (k % 3 == 0 ? -1 : static_cast<BlockId>(k)));
  CHECK(index.size() == 21);
  CHECK_FALSE(index.insert(1, 99));  // present: refused, unchanged
  CHECK(index.find(1) == 1);
  index.erase(12345);  // absent: nothing happens
  CHECK(index.size() == 21);
}
