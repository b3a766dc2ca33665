#include "traces/json_row.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <limits>
#include <utility>

#include "traces/line_reader.hpp"

namespace twin {

namespace {

constexpr std::array<std::pair<std::string_view, JsonKey>, 20> kKeys{{
    {"timestamp", JsonKey::timestamp},
    {"input_length", JsonKey::input_length},
    {"output_length", JsonKey::output_length},
    {"chat_id", JsonKey::chat_id},
    {"parent_chat_id", JsonKey::parent_chat_id},
    {"turn", JsonKey::turn},
    {"id", JsonKey::id},
    {"arrival_s", JsonKey::arrival_s},
    {"prompt_len", JsonKey::prompt_len},
    {"output_len", JsonKey::output_len},
    {"hash_block_size", JsonKey::hash_block_size},
    {"priority", JsonKey::priority},
    {"session_id", JsonKey::session_id},
    {"cancel_s", JsonKey::cancel_s},
    {"hash_ids", JsonKey::hash_ids},
    {"prompt_tokens", JsonKey::prompt_tokens},
    {"input_toks", JsonKey::input_toks},
    {"output_toks", JsonKey::output_toks},
    {"arrival_time_ns", JsonKey::arrival_time_ns},
    {"input_tok_ids", JsonKey::prompt_tokens},
}};

// The key's entry in kKeys (its spelling, for messages), or nullptr.
const std::pair<std::string_view, JsonKey>* lookup_key(std::string_view name) {
  for (const auto& entry : kKeys)
    if (entry.first == name) return &entry;
  return nullptr;
}

bool is_array_key(JsonKey k) { return k == JsonKey::hash_ids || k == JsonKey::prompt_tokens; }

}  // namespace

struct JsonRowSax {
  using json = nlohmann::json;
  JsonRowParser& row;
  std::vector<std::uint64_t>& hash_ids;
  std::vector<TokenId>& prompt_tokens;
  std::string& error;
  int depth = 0;
  int skip_depth = 0;  // > 0 while inside a value of an unknown key
  JsonKey current = JsonKey::unknown;  // key of the value being read
  std::string_view current_name{};     // as the file spells it (several names share a key)
  bool in_array = false;
  bool started = false;
  std::uint32_t seen = 0;  // the known keys read so far, one bit per JsonKey
  static_assert(static_cast<int>(JsonKey::unknown) <= 32);

  bool fail(std::string message) {
    error = std::move(message);
    return false;
  }
  std::string key_name() const { return std::string(current_name); }
  bool top_level_value() {
    if (!started) return fail("expected a JSON object per line");
    return true;
  }
  // A scalar at depth 1 for the current key, or an element of a known array.
  bool scalar(bool is_number, bool negative_or_float, std::int64_t value, std::uint64_t uvalue,
              bool is_unsigned, const std::string* float_text) {
    if (!top_level_value()) return false;
    if (skip_depth > 0 || current == JsonKey::unknown) return true;
    if (in_array) {
      if (!is_number || float_text) return fail("'" + key_name() + "' must hold integers");
      if ((current == JsonKey::hash_ids ? hash_ids.size() : prompt_tokens.size()) >= kMaxRowListElements)
        return fail("'" + key_name() + "' holds more than " + std::to_string(kMaxRowListElements) + " elements");
      if (current == JsonKey::hash_ids) {
        if (negative_or_float) return fail("'hash_ids' must hold non-negative integers");
        hash_ids.push_back(is_unsigned ? uvalue : static_cast<std::uint64_t>(value));
      } else {
        if (is_unsigned ? uvalue > static_cast<std::uint64_t>(std::numeric_limits<TokenId>::max())
                        : (value < 0 || value > std::numeric_limits<TokenId>::max()))
          return fail("'" + key_name() + "' holds a value outside 0..2^31-1");
        prompt_tokens.push_back(static_cast<TokenId>(is_unsigned ? uvalue : static_cast<std::uint64_t>(value)));
      }
      return true;
    }
    if (is_array_key(current)) return fail("'" + key_name() + "' must be an array of integers");
    if (!is_number) return fail("'" + key_name() + "' must be a number");
    auto idx = static_cast<int>(current);
    JsonNumber& n = row.numbers_[idx];
    n.present = true;
    n.is_float = float_text != nullptr;
    if (float_text) {
      row.float_text_[idx] = *float_text;  // reuses capacity after the first rows
      n.text = row.float_text_[idx];
    } else if (is_unsigned) {
      if (uvalue > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return fail("'" + key_name() + "' is too large");
      n.integer = static_cast<std::int64_t>(uvalue);
    } else {
      n.integer = value;
    }
    return true;
  }

  bool null() {
    if (!top_level_value()) return false;
    if (in_array && skip_depth == 0) return fail("'" + key_name() + "' must hold integers");
    return true;  // a null scalar is an absent field
  }
  bool boolean(bool) { return scalar(false, false, 0, 0, false, nullptr); }
  bool number_integer(json::number_integer_t v) { return scalar(true, v < 0, v, 0, false, nullptr); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(true, false, 0, v, true, nullptr); }
  bool number_float(json::number_float_t, const json::string_t& s) {
    return scalar(true, true, 0, 0, false, &s);
  }
  bool string(json::string_t&) { return scalar(false, false, 0, 0, false, nullptr); }
  bool binary(json::binary_t&) { return scalar(false, false, 0, 0, false, nullptr); }
  bool start_object(std::size_t) {
    if (!started) {
      started = true;
      depth = 1;
      return true;
    }
    if (in_array && skip_depth == 0) return fail("'" + key_name() + "' must hold integers");
    if (skip_depth > 0 || current == JsonKey::unknown) {
      ++skip_depth;
      return true;
    }
    return fail("'" + key_name() + "' must be a number");
  }
  bool end_object() {
    if (skip_depth > 0) {
      --skip_depth;
      return true;
    }
    depth = 0;
    return true;
  }
  bool start_array(std::size_t) {
    if (!top_level_value()) return false;
    if (skip_depth > 0 || current == JsonKey::unknown) {
      ++skip_depth;
      return true;
    }
    if (in_array) return fail("'" + key_name() + "' must hold integers, not arrays");
    if (!is_array_key(current)) return fail("'" + key_name() + "' must be a number, not an array");
    in_array = true;
    if (current == JsonKey::hash_ids)
      row.saw_hash_ids_ = true;
    else
      row.saw_prompt_tokens_ = true;
    return true;
  }
  bool end_array() {
    if (skip_depth > 0) {
      --skip_depth;
      return true;
    }
    in_array = false;
    return true;
  }
  bool key(json::string_t& name) {
    if (skip_depth > 0) return true;
    const auto* entry = lookup_key(name);
    current = entry ? entry->second : JsonKey::unknown;
    current_name = entry ? entry->first : std::string_view();
    if (entry) {  // a field read twice would silently keep the last value
      const std::uint32_t bit = std::uint32_t{1} << static_cast<int>(entry->second);
      if (seen & bit) return fail("'" + key_name() + "' given twice (a duplicate key, or two names of one field)");
      seen |= bit;
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
    if (error.empty()) error = "invalid JSON near column " + std::to_string(position);
    return false;
  }
};

bool JsonRowParser::parse(std::string_view line, std::vector<std::uint64_t>& hash_ids,
                          std::vector<TokenId>& prompt_tokens, std::string& error) {
  for (auto& n : numbers_) n = JsonNumber{};
  saw_hash_ids_ = saw_prompt_tokens_ = false;
  hash_ids.clear();
  prompt_tokens.clear();
  error.clear();
  JsonRowSax sax{*this, hash_ids, prompt_tokens, error};
  const bool ok = nlohmann::json::sax_parse(line.begin(), line.end(), &sax);
  if (!ok) {
    if (error.empty()) error = "invalid JSON";
    return false;
  }
  if (!sax.started) {
    error = "expected a JSON object per line";
    return false;
  }
  return true;
}

}  // namespace twin
