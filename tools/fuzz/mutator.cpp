#include "tools/fuzz/mutator.hpp"

#include <algorithm>
#include <array>
#include <string_view>

namespace twin::fuzz {
namespace {

// Values at the edges of what readers convert: overflow of double, int32,
// int64 and uint64, non-finite spellings, zero and negatives, tiny values,
// and non-numbers where a number is expected.
constexpr std::array<std::string_view, 40> kInteresting = {
    "1e309", "-1e309", "-1", "0", "-0", "nan", "NaN", "inf", "-inf", "Infinity",
    "2147483647", "2147483648", "-2147483648", "4294967295", "4294967296",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "1e-300", "4.9e-324", "1e18", "1e19", "0.0000000001",
    "99999999999999999999999999", "65536", "255", "1.5", "0.5", "1e9", "-1e-9",
    "0x10", "", "null", "true", "\"\"", "[]", "{}", "1.", ".5"};

// Syntax that readers split on or quote with, and bytes that are not text.
constexpr std::array<std::string_view, 24> kTokens = {
    ",", "\"", "{", "}", "[", "]", ":", "\n", "\r\n", " ", "\t", ",,", "\"\"", "\\", "\\u0000",
    std::string_view("\0", 1), "\xff", "\xc3\x28", "\\ud800", "-", ".", "e", "E", "#"};

bool is_number_char(char c) {
  return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
}

}  // namespace

Mutator::Mutator(std::uint64_t seed, std::size_t max_bytes) : rng_(seed, 0x66757a7a), max_bytes_(max_bytes) {}

std::string Mutator::next(const std::vector<std::string>& corpus) {
  std::string data = corpus.empty() ? std::string() : corpus[pick(corpus.size())];
  // Mostly one mutation: an input broken in one place reaches the check of
  // that place; one broken in eight stops at the first.
  const std::size_t rounds = pick(2) == 0 ? 1 : 2 + pick(3);
  for (std::size_t i = 0; i < rounds; ++i) mutate_once(data, corpus);
  return data;
}

void Mutator::mutate_once(std::string& d, const std::vector<std::string>& corpus) {
  // Text-aware mutations are weighted up: most of our inputs are text, and a
  // random bit flip mostly lands in a place the reader rejects at once.
  switch (pick(16)) {
    case 0: bit_flip(d); break;
    case 1: set_byte(d); break;
    case 2: insert_bytes(d); break;
    case 3: erase_bytes(d); break;
    case 4: copy_block(d); break;
    case 5: splice(d, corpus); break;
    case 6: truncate(d); break;
    case 7: case 8: case 9: case 10: replace_number(d); break;
    case 11: case 12: insert_token(d); break;
    case 13: nest(d); break;
    case 14: repeat_line(d); break;
    default: erase_bytes(d); insert_token(d); break;
  }
  clamp(d);
}

void Mutator::bit_flip(std::string& d) {
  if (d.empty()) return;
  d[pick(d.size())] ^= static_cast<char>(1u << pick(8));
}

void Mutator::set_byte(std::string& d) {
  if (d.empty()) return;
  d[pick(d.size())] = static_cast<char>(rng_.below(256));
}

void Mutator::insert_bytes(std::string& d) {
  const std::size_t at = pick(d.size() + 1);
  // Mostly short random bytes; sometimes a long run of one byte (a huge
  // field, a line without end).
  if (pick(4) == 0) {
    const std::size_t n = 1 + pick(std::min<std::size_t>(max_bytes_, 8192));
    d.insert(at, n, static_cast<char>(rng_.below(256)));
    return;
  }
  const std::size_t n = 1 + pick(8);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng_.below(256));
  d.insert(at, bytes);
}

void Mutator::erase_bytes(std::string& d) {
  if (d.empty()) return;
  const std::size_t at = pick(d.size());
  const std::size_t n = 1 + pick(std::min<std::size_t>(d.size() - at, 16));
  d.erase(at, n);
}

void Mutator::copy_block(std::string& d) {
  if (d.empty()) return;
  const std::size_t from = pick(d.size());
  const std::size_t n = 1 + pick(std::min<std::size_t>(d.size() - from, 64));
  const std::string block = d.substr(from, n);
  d.insert(pick(d.size() + 1), block);
}

void Mutator::splice(std::string& d, const std::vector<std::string>& corpus) {
  if (corpus.empty()) return;
  const std::string& other = corpus[pick(corpus.size())];
  const std::size_t cut_here = pick(d.size() + 1);
  const std::size_t cut_there = pick(other.size() + 1);
  d = d.substr(0, cut_here) + other.substr(cut_there);
}

void Mutator::truncate(std::string& d) { d.resize(pick(d.size() + 1)); }

void Mutator::replace_number(std::string& d) {
  // A run of number characters around a random digit (or anywhere, if there
  // is none) gives way to an interesting value.
  std::size_t at = pick(d.size() + 1);
  std::size_t digit = d.size();
  for (std::size_t i = 0; i < d.size(); ++i) {
    const std::size_t j = (at + i) % d.size();
    if (d[j] >= '0' && d[j] <= '9') {
      digit = j;
      break;
    }
  }
  const std::string_view value = kInteresting[pick(kInteresting.size())];
  if (digit == d.size()) {
    d.insert(std::min(at, d.size()), value);
    return;
  }
  std::size_t begin = digit, end = digit;
  while (begin > 0 && is_number_char(d[begin - 1])) --begin;
  while (end < d.size() && is_number_char(d[end])) ++end;
  d.replace(begin, end - begin, value);
}

void Mutator::insert_token(std::string& d) {
  const std::string_view token = kTokens[pick(kTokens.size())];
  d.insert(pick(d.size() + 1), token);
}

void Mutator::nest(std::string& d) {
  // Deep nesting, balanced or not: the stack depth of any recursive reader
  // or printer is what this finds.
  const std::size_t depth = 1 + pick(std::min<std::size_t>(max_bytes_ / 2, 50000));
  const bool object = pick(2) == 0;
  std::string open, close;
  for (std::size_t i = 0; i < depth; ++i) open += object ? "{\"a\":" : "[";
  if (pick(3) != 0) {
    close.assign(depth, object ? '}' : ']');
  }
  const std::size_t at = pick(d.size() + 1);
  d.insert(at, open + "1" + close);
}

void Mutator::repeat_line(std::string& d) {
  // Many rows: one line of the input, repeated.
  if (d.empty()) return;
  const std::size_t at = pick(d.size());
  std::size_t begin = d.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  std::size_t end = d.find('\n', at);
  end = end == std::string::npos ? d.size() : end + 1;
  std::string line = d.substr(begin, end - begin);
  if (line.empty() || line.back() != '\n') line += '\n';
  const std::size_t times = 1 + pick(256);
  std::string block;
  for (std::size_t i = 0; i < times && block.size() < max_bytes_; ++i) block += line;
  d.insert(end, block);
}

void Mutator::clamp(std::string& d) const {
  if (d.size() > max_bytes_) d.resize(max_bytes_);
}

}  // namespace twin::fuzz
