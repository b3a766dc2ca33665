#include "serve/byte_tokenizer.hpp"

#include "base/error.hpp"

namespace twin {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the UTF-8 sequence a lead byte starts; 0 for a byte that
// cannot start one.
std::size_t sequence_length(std::uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Whether `b` may follow the bytes held so far (the second byte of E0, ED,
// F0 and F4 sequences is narrower, so no overlong form or surrogate passes).
bool continues(const std::string& held, std::uint8_t b) {
  if ((b & 0xC0) != 0x80) return false;
  if (held.size() != 1) return true;
  const auto lead = static_cast<std::uint8_t>(held[0]);
  if (lead == 0xE0) return b >= 0xA0;
  if (lead == 0xED) return b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90;
  if (lead == 0xF4) return b <= 0x8F;
  return true;
}

}  // namespace

ByteTokenizer::ByteTokenizer(std::int64_t vocab_size) {
  if (vocab_size < 256) {
    throw UsageError("the byte-level tokenizer needs a vocabulary of at least 256 tokens; the model has " +
                     std::to_string(vocab_size));
  }
  offset_ = vocab_size >= 259 ? 3 : 0;
}

std::vector<TokenId> ByteTokenizer::encode(std::string_view text) const {
  std::vector<TokenId> out;
  out.reserve(text.size());
  for (const char c : text) out.push_back(byte_token(static_cast<std::uint8_t>(c)));
  return out;
}

void Detokenizer::flush_pending(std::string& out) {
  for (std::size_t i = 0; i < pending_.size(); ++i) out += kReplacement;
  pending_.clear();
  needed_ = 0;
}

std::string Detokenizer::push(TokenId token) {
  std::string out;
  const std::int64_t b = static_cast<std::int64_t>(token) - offset_;
  if (b < 0 || b > 255) {
    flush_pending(out);
    out += static_cast<char>(' ' + (token < 0 ? 0 : token % 95));
    return out;
  }
  const auto byte = static_cast<std::uint8_t>(b);
  if (!pending_.empty()) {
    if (continues(pending_, byte)) {
      pending_ += static_cast<char>(byte);
      if (pending_.size() == needed_) {
        out += pending_;
        pending_.clear();
        needed_ = 0;
      }
      return out;
    }
    flush_pending(out);  // the open character broke off: each held byte is U+FFFD
  }
  const std::size_t n = sequence_length(byte);
  if (n == 0) {
    out += kReplacement;
  } else if (n == 1) {
    out += static_cast<char>(byte);
  } else {
    pending_ = std::string(1, static_cast<char>(byte));
    needed_ = n;
  }
  return out;
}

std::string Detokenizer::flush() {
  std::string out;
  flush_pending(out);
  return out;
}

}  // namespace twin
