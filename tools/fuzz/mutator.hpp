#pragma once
// Deterministic input mutation for the fuzz driver: the same seed gives the
// same sequence of inputs on every platform (our own xoshiro PRNG, no std::
// distributions). Mutations are the byte-level ones coverage-guided fuzzers
// use (bit flips, byte insert / erase / overwrite, block copy, splice with
// another corpus entry, truncation) plus text-aware ones aimed at our
// readers: numbers replaced by boundary values (1e309, -1, nan, 2^31-1,
// 2^63, ...), deep nesting, long runs of one byte, repeated lines.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "traces/prng.hpp"

namespace twin::fuzz {

class Mutator {
 public:
  // max_bytes bounds every output, so every input finishes quickly.
  Mutator(std::uint64_t seed, std::size_t max_bytes);

  // A new input: a corpus entry with 1 to 4 stacked mutations.
  std::string next(const std::vector<std::string>& corpus);

  // One mutation of `data` in place (splice partners come from corpus).
  void mutate_once(std::string& data, const std::vector<std::string>& corpus);

 private:
  std::size_t pick(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng_.below(n)); }
  void bit_flip(std::string& d);
  void set_byte(std::string& d);
  void insert_bytes(std::string& d);
  void erase_bytes(std::string& d);
  void copy_block(std::string& d);
  void splice(std::string& d, const std::vector<std::string>& corpus);
  void truncate(std::string& d);
  void replace_number(std::string& d);
  void insert_token(std::string& d);
  void nest(std::string& d);
  void repeat_line(std::string& d);
  void clamp(std::string& d) const;

  Rng rng_;
  std::size_t max_bytes_;
};

}  // namespace twin::fuzz
