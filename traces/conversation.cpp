#include "traces/conversation.hpp"

#include "base/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <unordered_set>

namespace twin {

namespace {

bool is_model_role(std::string_view role) {
  constexpr std::array<std::string_view, 6> kModel{"gpt", "assistant", "chatgpt", "bard", "bing", "model"};
  for (auto r : kModel)
    if (role == r) return true;
  return false;
}

// FNV-1a over the parent's hash and the block's bytes: a stable name for a
// block under its prefix.
std::uint64_t block_hash(std::uint64_t parent, std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ull;
  };
  for (int i = 0; i < 8; ++i) mix(static_cast<unsigned char>(parent >> (8 * i)));
  for (char c : bytes) mix(static_cast<unsigned char>(c));
  return h;
}

struct Message {
  std::string role;
  std::string text;
  bool has_role = false;
};

}  // namespace

// Reads the messages of one conversation object, handing each to the parser
// as it ends (so memory is the context's bytes, not a record per message:
// a 256 MiB object of 13-byte messages would be 1.5 GB of records); every
// other value is skipped whatever its shape.
struct ConversationSax : nlohmann::json_sax<nlohmann::json> {
  ConversationParser& parser;
  std::vector<ConversationTurn>& turns;
  Message message;            // the message being read
  std::size_t message_count = 0;
  std::string& error;
  int depth = 0;
  std::string top_key;       // key of the depth-1 value being read
  std::string message_key;   // key of the message field being read
  bool in_list = false;      // inside the messages array (depth 2)
  bool in_message = false;   // inside one message (depth 3)
  bool saw_list = false;
  // Keys of the conversation object and of the message being read: a key
  // given twice is refused, as in every JSON input (never last-wins).
  std::unordered_set<std::string> top_keys, message_keys;

  ConversationSax(ConversationParser& p, std::vector<ConversationTurn>& t, std::string& e)
      : parser(p), turns(t), error(e) {}

  bool fail(std::string message) {
    error = std::move(message);
    return false;
  }
  bool is_list_key() const { return top_key == "conversations" || top_key == "messages"; }
  // A scalar value: a message field, a list element, or skipped.
  bool scalar(std::string* text, const char* kind) {
    if (depth == 0) return fail("expected a conversation object");
    if (depth == 1 && is_list_key()) return fail("'" + top_key + "' must be an array of messages, not " + kind);
    if (depth == 2 && in_list) return fail("each message must be an object, not " + std::string(kind));
    if (depth == 3 && in_message) {
      const bool role_key = message_key == "from" || message_key == "role";
      const bool text_key = message_key == "value" || message_key == "content";
      if (role_key || text_key) {
        if (!text && std::string_view(kind) == "null") return true;  // an absent field
        if (!text) return fail("message field '" + message_key + "' must be a string, not " + kind);
        if (role_key) {
          message.role = *text;
          message.has_role = true;
        } else {
          message.text = std::move(*text);  // the lexer clears its buffer before the next token
        }
      }
    }
    return true;
  }
  bool null() override { return scalar(nullptr, "null"); }
  bool boolean(bool) override { return scalar(nullptr, "a boolean"); }
  bool number_integer(number_integer_t) override { return scalar(nullptr, "a number"); }
  bool number_unsigned(number_unsigned_t) override { return scalar(nullptr, "a number"); }
  bool number_float(number_float_t, const string_t&) override { return scalar(nullptr, "a number"); }
  bool string(string_t& s) override { return scalar(&s, "a string"); }
  bool binary(binary_t&) override { return scalar(nullptr, "binary"); }
  bool start_object(std::size_t) override {
    if (depth == 1 && is_list_key()) return fail("'" + top_key + "' must be an array of messages, not an object");
    if (depth == 3 && in_message && (message_key == "value" || message_key == "content"))
      return fail("message field '" + message_key + "' must be a string, not an object");
    ++depth;
    if (depth == 1) top_keys.clear();
    if (depth == 3 && in_list) {
      in_message = true;
      message_key.clear();
      message_keys.clear();
      message = Message{};
      ++message_count;
    }
    return true;
  }
  bool end_object() override {
    if (depth == 3 && in_message) {
      in_message = false;
      if (!message.has_role) return fail("message " + std::to_string(message_count) + " has no 'from' (or 'role')");
      if (!parser.add_message(message.role, message.text, turns, error)) return false;
    }
    --depth;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth == 0) return fail("expected a conversation object");
    if (depth == 2 && in_list) return fail("each message must be an object, not an array");
    if (depth == 3 && in_message && (message_key == "value" || message_key == "content"))
      return fail("message field '" + message_key + "' must be a string, not an array");
    ++depth;
    if (depth == 2 && is_list_key()) {
      in_list = true;
      saw_list = true;
    }
    return true;
  }
  bool end_array() override {
    if (depth == 2 && in_list) in_list = false;
    --depth;
    return true;
  }
  bool key(string_t& k) override {
    if (depth == 1) {
      if (!top_keys.insert(k).second) return fail("key '" + excerpt(k) + "' given twice (a duplicate key)");
      top_key = k;
    }
    if (depth == 3 && in_message) {
      if (!message_keys.insert(k).second)
        return fail("message " + std::to_string(message_count) + ": key '" + excerpt(k) +
                    "' given twice (a duplicate key)");
      message_key = k;
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    if (error.empty()) error = "invalid JSON near byte " + std::to_string(position);
    return false;
  }
};

bool ConversationParser::parse(std::string_view object, std::vector<ConversationTurn>& turns, std::string& error) {
  turns.clear();
  error.clear();
  context_.clear();
  blocks_.clear();
  ConversationSax sax(*this, turns, error);
  if (!nlohmann::json::sax_parse(object.begin(), object.end(), &sax)) {
    if (error.empty()) error = "invalid JSON";
    return false;
  }
  if (!sax.saw_list) {
    error = "a conversation needs a 'conversations' (or 'messages') array";
    return false;
  }
  return true;
}

bool ConversationParser::add_message(std::string_view role, std::string_view text,
                                     std::vector<ConversationTurn>& turns, std::string& error) {
  constexpr std::size_t kBlockBytes = kConversationHashBlock * kConversationBytesPerToken;
  constexpr auto kMaxTokens = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());
  const std::size_t tokens = (text.size() + kConversationBytesPerToken - 1) / kConversationBytesPerToken;
  const std::size_t context_tokens = context_.size() / kConversationBytesPerToken;
  if (is_model_role(role) && context_tokens >= 1) {
    if (context_tokens > kMaxTokens || tokens > kMaxTokens) {
      error = "a conversation over 2^31-1 tokens";
      return false;
    }
    ConversationTurn& t = turns.emplace_back();
    t.prompt_len = static_cast<std::int32_t>(context_tokens);
    t.output_len = std::max<std::int32_t>(1, static_cast<std::int32_t>(tokens));
    t.hash_blocks = context_tokens / kConversationHashBlock;
  }
  context_ += text;
  context_.resize(context_.size() + tokens * kConversationBytesPerToken - text.size(), '\0');
  while ((blocks_.size() + 1) * kBlockBytes <= context_.size()) {
    const std::uint64_t parent = blocks_.empty() ? 0 : blocks_.back();
    blocks_.push_back(block_hash(parent, std::string_view(context_).substr(blocks_.size() * kBlockBytes, kBlockBytes)));
  }
  return true;
}

}  // namespace twin
