#pragma once
// The byte-level fallback tokenizer of `twinserve serve`: any client can send
// text without a model hub, and every output token comes back as text.
//   text -> tokens: each UTF-8 byte b is one token, id offset + b, where the
//     offset is 3 for a vocabulary of at least 259 (where Llama's and other
//     SentencePiece vocabularies keep their <0x00>..<0xFF> byte tokens) and
//     0 for one of 256 to 258;
//   tokens -> text: an id in [offset, offset + 256) is its byte again (bytes
//     are joined into UTF-8 characters as they complete; a byte that cannot
//     start or continue one reads U+FFFD); any other id has no byte and reads
//     as one printable ASCII character, ' ' + id % 95, so every token shows.
// The inverse holds for byte tokens only: a model with real weights and its
// own tokenizer produces ids this mapping cannot name.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/types.hpp"

namespace twin {

class ByteTokenizer {
 public:
  // Throws UsageError for a vocabulary of fewer than 256 tokens.
  explicit ByteTokenizer(std::int64_t vocab_size);

  std::int32_t offset() const { return offset_; }
  std::vector<TokenId> encode(std::string_view text) const;
  // The id of byte b.
  TokenId byte_token(std::uint8_t b) const { return static_cast<TokenId>(offset_ + b); }

 private:
  std::int32_t offset_ = 0;
};

// Turns tokens into valid UTF-8 one token at a time, holding the bytes of a
// character until it is complete (a streamed chunk never splits one).
class Detokenizer {
 public:
  explicit Detokenizer(const ByteTokenizer& tokenizer) : offset_(tokenizer.offset()) {}
  // The text the token completes (possibly empty while a character is open).
  std::string push(TokenId token);
  // What is still held at the end: each held byte as U+FFFD.
  std::string flush();

 private:
  void flush_pending(std::string& out);
  std::int32_t offset_ = 0;
  std::string pending_;     // bytes of an open character
  std::size_t needed_ = 0;  // its full length
};

}  // namespace twin
