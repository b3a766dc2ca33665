#pragma once
// The body of POST /v1/completions and /v1/chat/completions read into plain
// data, and OpenAI's error shape. Pure: no HTTP, no engine.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/types.hpp"
#include "serve/byte_tokenizer.hpp"

namespace twin {

// {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};
std::string api_error_json(const ApiError& error);

class ApiException : public std::runtime_error {
 public:
  explicit ApiException(ApiError error) : std::runtime_error(error.message), error_(std::move(error)) {}
  const ApiError& error() const { return error_; }

 private:
  ApiError error_;
};

// What the server needs to know to parse a body.
struct ApiLimits {
  std::string model_name;          // the served model (--served-model-name)
  std::int64_t vocab_size = 0;     // token ids must be below it
  std::int32_t max_model_len = 0;  // prompt + max_tokens may not exceed it
};

struct CompletionParams {
  bool chat = false;
  std::vector<TokenId> prompt;
  std::int32_t max_tokens = 16;
  float temperature = 1.0f;
  std::int32_t top_k = 0;  // 0: none (OpenAI's -1 means the same)
  float top_p = 1.0f;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Throws ApiException (400, or 404 for another model) naming the field.
CompletionParams parse_completion_request(const std::string& body, bool chat, const ApiLimits& limits,
                                          const ByteTokenizer& tokenizer);

// The chat template of the byte-level fallback: each message as
// "<|role|>\n" + content + "\n", then "<|assistant|>\n".
std::string chat_prompt_text(const std::vector<std::pair<std::string, std::string>>& messages);

}  // namespace twin
