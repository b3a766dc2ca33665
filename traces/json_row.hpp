#pragma once
// Parses one JSONL trace record (a flat object of numbers and number arrays)
// with a SAX handler: no DOM per row, and float fields keep their original
// text so times convert to nanoseconds exactly.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/types.hpp"

namespace twin {

// The keys any of our JSONL formats use; others are ignored.
enum class JsonKey : std::uint8_t {
  timestamp, input_length, output_length, chat_id, parent_chat_id, turn,  // Mooncake / Bailian
  id, arrival_s, prompt_len, output_len, hash_block_size, priority, session_id, cancel_s,  // ours
  input_toks, output_toks, arrival_time_ns,  // LLMServingSim
  count_scalars,
  hash_ids = count_scalars, prompt_tokens,  // arrays (LLMServingSim's input_tok_ids are prompt_tokens)
  unknown,
};

struct JsonNumber {
  bool present = false;
  bool is_float = false;
  std::int64_t integer = 0;  // when !is_float
  std::string_view text;     // when is_float: the number as written (valid until next parse)
};

class JsonRowParser {
 public:
  // Parses one line. Arrays land in hash_ids / prompt_tokens (cleared first,
  // capacity kept). On failure returns false with a message in error.
  bool parse(std::string_view line, std::vector<std::uint64_t>& hash_ids,
             std::vector<TokenId>& prompt_tokens, std::string& error);

  const JsonNumber& get(JsonKey key) const { return numbers_[static_cast<int>(key)]; }
  bool has_array(JsonKey key) const {
    return key == JsonKey::hash_ids ? saw_hash_ids_ : saw_prompt_tokens_;
  }

 private:
  friend struct JsonRowSax;
  JsonNumber numbers_[static_cast<int>(JsonKey::count_scalars)];
  std::string float_text_[static_cast<int>(JsonKey::count_scalars)];
  bool saw_hash_ids_ = false;
  bool saw_prompt_tokens_ = false;
};

}  // namespace twin
