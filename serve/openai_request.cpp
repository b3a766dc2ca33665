#include "serve/openai_request.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "models/json_fields.hpp"

namespace twin {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message, int status = 400,
                      const std::string& code = "") {
  ApiError e;
  e.status = status;
  e.message = message;
  e.param = param;
  e.code = code;
  throw ApiException(std::move(e));
}

// The request is parsed with the guards of every file reader (depth, and
// numbers beyond a double a 400 naming the key), and with a value budget a
// valid request never needs: a prompt holds at most max_model_len tokens,
// so twice that plus room for the other fields. A DOM value costs ~16 bytes
// for as few as 2 of text ("1,"), so without it a list body cost 8x its size.
JsonLimits body_json_limits(const std::string& text, const ApiLimits& limits) {
  JsonLimits j;
  j.max_bytes = text.size();  // the HTTP front bounds the body while reading it
  j.max_depth = 32;
  j.max_values = 2 * static_cast<std::size_t>(std::max(limits.max_model_len, 0)) + 65536;
  return j;
}

// The longest string in raw JSON text, in bytes as written. The JSON
// lexer builds each string whole (doubling its buffer as it goes) before
// any limit can see it, so a string no field can use is refused from the
// text: a prompt of max_model_len byte tokens is at most 6 bytes a token
// written as \u escapes.
std::size_t longest_string(std::string_view text) {
  std::size_t longest = 0, start = 0;
  bool in = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!in) {
      if (c == '"') in = true, start = i + 1;
    } else if (escaped) {
      escaped = false;
    } else if (c == '\\') {
      escaped = true;
    } else if (c == '"') {
      in = false;
      longest = std::max(longest, i - start);
    }
  }
  return in ? std::max(longest, text.size() - start) : longest;
}

[[noreturn]] void context_exceeded(const std::string& param, std::int64_t prompt_len, const ApiLimits& limits,
                                   bool at_least = false) {
  bad(param,
      std::string("the prompt has ") + (at_least ? "at least " : "") + std::to_string(prompt_len) + " tokens; this model's maximum context length is " +
          std::to_string(limits.max_model_len) + " tokens, and at least one token must be generated",
      400, "context_length_exceeded");
}

// Text becomes one token per byte (serve/byte_tokenizer.hpp): text that
// cannot fit is refused before it is encoded (4 bytes per token).
void check_text_fits(std::size_t bytes, const std::string& param, const ApiLimits& limits) {
  if (static_cast<std::int64_t>(bytes) >= limits.max_model_len) {
    context_exceeded(param, static_cast<std::int64_t>(bytes), limits, true);
  }
}

bool present(const json& body, const char* key) { return body.contains(key) && !body.at(key).is_null(); }

double number_field(const json& body, const char* key, double lo, double hi) {
  const json& v = body.at(key);
  if (!v.is_number()) bad(key, std::string("'") + key + "' must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    bad(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                 "; got " + json_excerpt(v));
  }
  return d;
}

std::int64_t integer_field(const json& body, const char* key, std::int64_t lo, std::int64_t hi) {
  const json& v = body.at(key);
  if (!v.is_number_integer()) bad(key, std::string("'") + key + "' must be an integer; got " + json_excerpt(v));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    bad(key, std::string("'") + key + "' must be at most " + std::to_string(hi) + "; got " + json_excerpt(v));
  }
  const std::int64_t i = v.get<std::int64_t>();
  if (i < lo || i > hi) {
    bad(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                 "; got " + json_excerpt(v));
  }
  return i;
}

bool bool_field(const json& body, const char* key) {
  const json& v = body.at(key);
  if (!v.is_boolean()) bad(key, std::string("'") + key + "' must be true or false; got " + json_excerpt(v));
  return v.get<bool>();
}

std::vector<TokenId> token_list(const json& list, const std::string& param, std::int64_t vocab) {
  std::vector<TokenId> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    if (!t.is_number_integer()) bad(param, "'" + param + "' token " + std::to_string(i) + " is not an integer");
    const std::int64_t id = t.is_number_unsigned() && t.get<std::uint64_t>() > static_cast<std::uint64_t>(vocab)
                                ? vocab
                                : t.get<std::int64_t>();
    if (id < 0 || id >= vocab) {
      bad(param, "'" + param + "' token " + std::to_string(i) + " is " + json_excerpt(t) + ", outside the vocabulary of " +
                     std::to_string(vocab) + " tokens");
    }
    out.push_back(static_cast<TokenId>(id));
  }
  return out;
}

std::vector<TokenId> completion_prompt(const json& body, const ApiLimits& limits, const ByteTokenizer& tokenizer) {
  if (!present(body, "prompt")) bad("prompt", "'prompt' is required");
  const json& p = body.at("prompt");
  if (p.is_string()) {
    check_text_fits(p.get_ref<const std::string&>().size(), "prompt", limits);
    return tokenizer.encode(p.get<std::string>());
  }
  if (!p.is_array()) bad("prompt", "'prompt' must be a string, a list of token ids, or a list holding one of those");
  if (p.empty()) return {};
  if (p[0].is_number_integer()) return token_list(p, "prompt", limits.vocab_size);
  if (p.size() > 1) bad("prompt", "one prompt per request: batched prompts (a list of " + std::to_string(p.size()) +
                                      ") are not supported");
  if (p[0].is_string()) {
    check_text_fits(p[0].get_ref<const std::string&>().size(), "prompt", limits);
    return tokenizer.encode(p[0].get<std::string>());
  }
  if (p[0].is_array()) return token_list(p[0], "prompt", limits.vocab_size);
  bad("prompt", "'prompt' must be a string, a list of token ids, or a list holding one of those");
}

std::string message_content(const json& m, std::size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  if (!m.contains("content") || m.at("content").is_null()) return "";
  const json& c = m.at("content");
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad(param, "'" + param + "' must be a string or a list of text parts");
  std::string text;
  for (const json& part : c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part.at("text").is_string()) {
      bad(param, "'" + param + "': only parts {\"type\": \"text\", \"text\": ...} are supported");
    }
    text += part.at("text").get<std::string>();
  }
  return text;
}

std::vector<TokenId> chat_prompt(const json& body, const ApiLimits& limits, const ByteTokenizer& tokenizer) {
  if (!present(body, "messages")) bad("messages", "'messages' is required");
  const json& ms = body.at("messages");
  if (!ms.is_array() || ms.empty()) bad("messages", "'messages' must be a non-empty list");
  std::vector<std::pair<std::string, std::string>> messages;
  std::size_t text_bytes = 0;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const json& m = ms[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m.at("role").is_string()) {
      bad(param, "'" + param + "' must be an object with a string 'role'");
    }
    messages.emplace_back(m.at("role").get<std::string>(), message_content(m, i));
    text_bytes += messages.back().first.size() + messages.back().second.size();
    check_text_fits(text_bytes, "messages", limits);
  }
  return tokenizer.encode(chat_prompt_text(messages));
}

std::vector<std::string> stop_strings(const json& body) {
  if (!present(body, "stop")) return {};
  const json& s = body.at("stop");
  std::vector<std::string> out;
  if (s.is_string()) {
    out.push_back(s.get<std::string>());
  } else if (s.is_array()) {
    if (s.size() > 16) bad("stop", "at most 16 stop strings; got " + std::to_string(s.size()));
    for (const json& x : s) {
      if (!x.is_string()) bad("stop", "'stop' must be a string or a list of strings");
      out.push_back(x.get<std::string>());
    }
  } else {
    bad("stop", "'stop' must be a string or a list of strings");
  }
  for (const std::string& x : out) {
    if (x.empty()) bad("stop", "a stop string may not be empty");
  }
  return out;
}

}  // namespace

std::string api_error_json(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string chat_prompt_text(const std::vector<std::pair<std::string, std::string>>& messages) {
  std::string text;
  for (const auto& [role, content] : messages) text += "<|" + role + "|>\n" + content + "\n";
  return text + "<|assistant|>\n";
}

namespace {

// The body as JSON, guarded against strings no prompt of this model could
// take, and the model it names checked against the one served.
json parse_body(const std::string& text, const ApiLimits& limits) {
  const std::size_t max_string = 6 * static_cast<std::size_t>(std::max(limits.max_model_len, 0)) + 65536;
  if (const std::size_t longest = longest_string(text); longest > max_string) {
    bad("", "the request body holds a string of " + std::to_string(longest) + " bytes, more than a prompt of " +
                std::to_string(limits.max_model_len) + " tokens (this model's maximum context length) can take",
        400, "context_length_exceeded");
  }
  json body;
  try {
    body = parse_json_guarded(text, "the request body", body_json_limits(text, limits));
  } catch (const JsonError& e) {
    bad(e.key_path.substr(0, e.key_path.find_first_of(".[")), e.what());  // param: the top-level field
  }
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  if (present(body, "model")) {
    if (!body.at("model").is_string()) bad("model", "'model' must be a string");
    const std::string model = body.at("model").get<std::string>();
    if (model != limits.model_name) {
      bad("model", "The model '" + excerpt(model) + "' does not exist; this server serves '" + limits.model_name + "'", 404,
          "model_not_found");
    }
  }
  return body;
}

// Refused by name rather than ignored: the answer would not be what was asked.
void refuse_unsupported(const json& body) {
  if (present(body, "n") && integer_field(body, "n", 1, 1 << 20) != 1) bad("n", "only n = 1 is supported");
  if (present(body, "best_of") && integer_field(body, "best_of", 1, 1 << 20) != 1) {
    bad("best_of", "only best_of = 1 is supported");
  }
  if (present(body, "echo") && bool_field(body, "echo")) bad("echo", "echo is not supported");
  if (present(body, "suffix")) bad("suffix", "suffix is not supported");
  if (present(body, "logprobs") && !(body.at("logprobs").is_boolean() && !body.at("logprobs").get<bool>())) {
    bad("logprobs", "logprobs are not supported");
  }
  if (present(body, "top_logprobs")) bad("top_logprobs", "logprobs are not supported");
  if (present(body, "tools") || present(body, "functions")) bad("tools", "tools are not supported");
  // Structured outputs change what is generated; vLLM honours them, so they
  // are refused rather than ignored ({"type": "text"} asks for nothing).
  if (present(body, "response_format")) {
    const json& f = body.at("response_format");
    if (!(f.is_object() && f.contains("type") && f.at("type") == "text")) {
      bad("response_format", "response_format (structured output) is not supported; only {\"type\": \"text\"}");
    }
  }
  for (const char* key : {"guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"}) {
    if (present(body, key)) bad(key, std::string(key) + " (structured output) is not supported");
  }
  if (present(body, "logit_bias") && !(body.at("logit_bias").is_object() && body.at("logit_bias").empty())) {
    bad("logit_bias", "logit_bias is not supported");
  }
  for (const char* key : {"presence_penalty", "frequency_penalty"}) {
    if (present(body, key) && number_field(body, key, -2, 2) != 0) bad(key, std::string(key) + " is not supported");
  }
  if (present(body, "repetition_penalty") && number_field(body, "repetition_penalty", 0, 100) != 1) {
    bad("repetition_penalty", "repetition_penalty is not supported");
  }
}

// max_tokens (chat: max_completion_tokens first), within the context left.
std::int32_t max_tokens_of(const json& body, bool chat, std::int64_t prompt_len, const ApiLimits& limits) {
  const std::int64_t room = limits.max_model_len - prompt_len;
  const char* max_key = chat && present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (!present(body, max_key)) {
    // OpenAI's default for completions; vLLM's (the context left) for chat.
    return static_cast<std::int32_t>(chat ? room : std::min<std::int64_t>(16, room));
  }
  const std::int64_t m = integer_field(body, max_key, 1, std::numeric_limits<std::int32_t>::max());
  if (m > room) {
    bad(max_key, "'" + std::string(max_key) + "' is " + std::to_string(m) + " but the prompt has " +
                     std::to_string(prompt_len) + " tokens and the maximum context length is " +
                     std::to_string(limits.max_model_len) + ": at most " + std::to_string(room) + " can be generated",
        400, "context_length_exceeded");
  }
  return static_cast<std::int32_t>(m);
}

void sampling_fields(const json& body, CompletionParams& p) {
  if (present(body, "temperature")) p.temperature = static_cast<float>(number_field(body, "temperature", 0, 100));
  if (present(body, "top_p")) {
    p.top_p = static_cast<float>(number_field(body, "top_p", 0, 1));
    if (p.top_p <= 0) bad("top_p", "'top_p' must be in (0, 1]");
  }
  if (present(body, "top_k")) {
    const std::int64_t k = integer_field(body, "top_k", -1, std::numeric_limits<std::int32_t>::max());
    p.top_k = k <= 0 ? 0 : static_cast<std::int32_t>(k);
  }
  if (present(body, "seed")) {
    const json& s = body.at("seed");
    if (!s.is_number_integer()) bad("seed", "'seed' must be an integer");
    p.seed = s.is_number_unsigned() ? s.get<std::uint64_t>() : static_cast<std::uint64_t>(s.get<std::int64_t>());
  }
}

void stream_fields(const json& body, CompletionParams& p) {
  if (present(body, "stream")) p.stream = bool_field(body, "stream");
  if (!present(body, "stream_options")) return;
  const json& so = body.at("stream_options");
  if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
  if (!p.stream) bad("stream_options", "'stream_options' needs 'stream': true");
  if (present(so, "include_usage")) {
    if (!so.at("include_usage").is_boolean()) bad("stream_options.include_usage", "'include_usage' must be true or false");
    p.include_usage = so.at("include_usage").get<bool>();
  }
}

}  // namespace

CompletionParams parse_completion_request(const std::string& text, bool chat, const ApiLimits& limits,
                                          const ByteTokenizer& tokenizer) {
  const json body = parse_body(text, limits);
  refuse_unsupported(body);
  CompletionParams p;
  p.chat = chat;
  p.prompt = chat ? chat_prompt(body, limits, tokenizer) : completion_prompt(body, limits, tokenizer);
  if (p.prompt.empty()) bad(chat ? "messages" : "prompt", "the prompt is empty");
  const auto prompt_len = static_cast<std::int64_t>(p.prompt.size());
  if (prompt_len >= limits.max_model_len) context_exceeded(chat ? "messages" : "prompt", prompt_len, limits);
  p.max_tokens = max_tokens_of(body, chat, prompt_len, limits);
  sampling_fields(body, p);
  p.stop = stop_strings(body);
  if (present(body, "ignore_eos")) p.ignore_eos = bool_field(body, "ignore_eos");
  stream_fields(body, p);
  return p;
}

}  // namespace twin
