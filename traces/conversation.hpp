#pragma once
// ShareGPT-style conversations as request turns. A conversation is an object
// with a "conversations" (ShareGPT: "from"/"value") or "messages" (OpenAI
// chat: "role"/"content") array. Each reply of the model ("gpt",
// "assistant", "chatgpt", "bard", "bing", "model") after some context is one
// request: its prompt is every message before it (the conversation so far),
// its output the reply. Other roles ("human", "user", "system", ...) only
// add context.
//
// No tokenizer is linked, so token counts are estimated from bytes: a
// message of B bytes (UTF-8, after JSON unescaping) is ceil(B / 4) tokens,
// the usual rule of thumb for English under BPE tokenizers; a reply is at
// least 1 token (its end of sequence). The prompt's full 16-token blocks
// (64 bytes of the message texts, each message padded to 4 bytes) are named
// by a hash of their bytes chained over the blocks before, so conversations
// that open alike, and later turns of one conversation, share prefix-cache
// blocks as they would on a server.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace twin {

inline constexpr std::int32_t kConversationBytesPerToken = 4;
inline constexpr std::int32_t kConversationHashBlock = 16;

struct ConversationTurn {
  std::int32_t prompt_len = 0;
  std::int32_t output_len = 0;
  // The prompt's hash ids are the first `hash_blocks` of the parser's
  // blocks(): kept once per conversation, not copied per turn, so memory
  // stays linear in the conversation's size.
  std::size_t hash_blocks = 0;
};

class ConversationParser {
 public:
  // One conversation object into its turns (cleared first; a conversation
  // without a reply has none). False with a message in error if it is not
  // a conversation.
  bool parse(std::string_view object, std::vector<ConversationTurn>& turns, std::string& error);
  // Hash ids of the last parsed conversation's full blocks, in order
  // (kConversationHashBlock tokens each); valid until the next parse.
  const std::vector<std::uint64_t>& blocks() const { return blocks_; }

 private:
  friend struct ConversationSax;
  // One message, in order: a model reply after some context becomes a turn.
  bool add_message(std::string_view role, std::string_view text, std::vector<ConversationTurn>& turns,
                   std::string& error);

  std::string context_;                // the message texts so far, each padded to 4 bytes
  std::vector<std::uint64_t> blocks_;  // chained hash of each full block of context_
};

}  // namespace twin
