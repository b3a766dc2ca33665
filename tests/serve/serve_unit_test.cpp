// The pure pieces of serve/: the byte-level tokenizer, the request parser's
// errors, the Prometheus text, and the Grafana dashboard that reads it.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "serve/byte_tokenizer.hpp"
#include "serve/openai_request.hpp"
#include "serve/serve_metrics.hpp"

namespace twin {
namespace {

std::string detokenize(const ByteTokenizer& tok, const std::vector<TokenId>& ids) {
  Detokenizer d(tok);
  std::string out;
  for (const TokenId t : ids) out += d.push(t);
  return out + d.flush();
}

TEST_CASE("byte tokenizer: bytes at offset 3 from a vocabulary of 259, 0 below, refused under 256") {
  CHECK(ByteTokenizer(32000).offset() == 3);
  CHECK(ByteTokenizer(256).offset() == 0);
  CHECK_THROWS_AS(ByteTokenizer(255), UsageError);
  const ByteTokenizer tok(32000);
  const std::string text = "h\xC3\xA9llo \xE2\x82\xAC";  // héllo €
  const std::vector<TokenId> ids = tok.encode(text);
  REQUIRE(ids.size() == text.size());
  CHECK(ids[0] == 3 + 'h');
  CHECK(detokenize(tok, ids) == text);
}

TEST_CASE("detokenizer: a character comes out whole, broken and foreign bytes read U+FFFD, other ids one ASCII char") {
  const ByteTokenizer tok(256);
  Detokenizer d(tok);
  CHECK(d.push(0xE2).empty());
  CHECK(d.push(0x82).empty());
  CHECK(d.push(0xAC) == "\xE2\x82\xAC");
  CHECK(d.push(0xC3).empty());
  CHECK(d.push('a') == "\xEF\xBF\xBD" "a");  // the open character broke off
  CHECK(d.push(0xFF) == "\xEF\xBF\xBD");
  CHECK(d.push(0xE0).empty());
  CHECK(d.push(0x80) == "\xEF\xBF\xBD\xEF\xBF\xBD");  // an overlong form never passes
  const ByteTokenizer big(32000);
  Detokenizer e(big);
  CHECK(e.push(1000) == std::string(1, static_cast<char>(' ' + 1000 % 95)));
}

ApiError parse_error(const std::string& body, bool chat = false) {
  const ByteTokenizer tok(256);
  ApiLimits limits{"tiny", 256, 100};
  try {
    parse_completion_request(body, chat, limits, tok);
  } catch (const ApiException& e) {
    return e.error();
  }
  return ApiError{0, "no error", "", "", ""};
}

TEST_CASE("request parser: bad input is a 400 naming the field, another model a 404") {
  CHECK(parse_error("{").status == 400);
  CHECK(parse_error(R"({"prompt": "x", "n": 3})").param == "n");
  CHECK(parse_error(R"({"prompt": [1, 256]})").param == "prompt");
  CHECK(parse_error(R"({"prompt": "x", "max_tokens": 100})").code == "context_length_exceeded");
  CHECK(parse_error(R"({"prompt": "x", "top_p": 0})").param == "top_p");
  CHECK(parse_error(R"({"prompt": ["a", "b"]})").param == "prompt");
  CHECK(parse_error(R"({"prompt": "x", "logprobs": 2})").param == "logprobs");
  CHECK(parse_error(R"({"messages": []})", true).param == "messages");
  // Structured output is refused by name, never silently ignored.
  CHECK(parse_error(R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}})",
                    true).param == "response_format");
  CHECK(parse_error(R"({"prompt": "x", "guided_json": {}})").param == "guided_json");
  CHECK(parse_error(R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "text"}})",
                    true).status == 0);
  CHECK(parse_error(R"({"prompt": "x", "some_future_field": 1})").status == 0);  // unknown: ignored, as vLLM
  const ApiError model = parse_error(R"({"prompt": "x", "model": "other"})");
  CHECK(model.status == 404);
  CHECK(model.code == "model_not_found");
  CHECK(api_error_json(model).find(R"("param":"model")") != std::string::npos);
}

std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

TEST_CASE("request parser: a value nested 100,000 deep in an integer field is a short 400, not a crash") {
  // Before: the error printed the whole value with dump(), which recursed
  // 100,000 frames deep and overflowed the stack (serve exited 139).
  for (const char* key : {"max_tokens", "n", "best_of", "top_k", "max_completion_tokens"}) {
    const bool chat = std::string(key) == "max_completion_tokens";
    const std::string prompt = chat ? R"("messages": [{"role": "user", "content": "hi"}])" : R"("prompt": "x")";
    const ApiError e = parse_error("{" + prompt + ", \"" + key + "\": " + nested_arrays(100000) + "}", chat);
    INFO(key << ": " << e.message);
    CHECK(e.status == 400);
    CHECK(e.param == key);
    CHECK_THAT(e.message, Catch::Contains("nested deeper than"));
    CHECK(api_error_json(e).size() < 1000);
  }
  // A value within the depth limit is quoted as an excerpt, never whole.
  const ApiError shallow = parse_error(R"({"prompt": "x", "max_tokens": )" + nested_arrays(20) + "}");
  CHECK(shallow.param == "max_tokens");
  CHECK(shallow.message.size() < 400);
  const ApiError big = parse_error(R"({"prompt": "x", "max_tokens": ")" + std::string(60000, 'a') + R"("})");
  CHECK(big.param == "max_tokens");
  CHECK(api_error_json(big).size() < 1000);  // before: the whole value came back
  const ApiError model = parse_error(R"({"prompt": "x", "model": ")" + std::string(60000, 'm') + R"("})");
  CHECK(model.status == 404);
  CHECK(api_error_json(model).size() < 1000);
}

TEST_CASE("request parser: max_tokens 1e309 is a 400 naming the field, not the JSON library's 500") {
  const ApiError e = parse_error(R"({"prompt": "x", "max_tokens": 1e309})");
  CHECK(e.status == 400);
  CHECK(e.param == "max_tokens");
  CHECK_THAT(e.message, Catch::Contains("max_tokens") && Catch::Contains("out of range"));
  CHECK(parse_error(R"({"prompt": "x", "temperature": -1e400})").param == "temperature");
}

TEST_CASE("request parser: memory stays a small multiple of the body (value budget, text checked before encoding)") {
  // A prompt of 10^6 token ids cannot fit a 100-token context: refused by the
  // value budget before the list is built, not after 16 bytes per id.
  std::string ids = "[";
  for (int i = 0; i < 1000000; ++i) ids += i ? ",1" : "1";
  const ApiError many = parse_error(R"({"prompt": )" + ids + "]}");
  CHECK(many.status == 400);
  CHECK_THAT(many.message, Catch::Contains("values"));
  // A string longer than any prompt can be is refused from the raw text,
  // before the JSON lexer copies it (doubling its buffer as it grows).
  const ApiError huge = parse_error(R"({"user": ")" + std::string(1 << 20, 'u') + R"(", "prompt": "x"})");
  CHECK(huge.status == 400);
  CHECK_THAT(huge.message, Catch::Contains("a string of 1048576 bytes"));
  // Text past the context is refused before it becomes 4 bytes per token.
  const ApiError text = parse_error(R"({"prompt": ")" + std::string(1000, 'a') + R"("})");
  CHECK(text.code == "context_length_exceeded");
  CHECK_THAT(text.message, Catch::Contains("at least 1000 tokens"));
  const ApiError chat =
      parse_error(R"({"messages": [{"role": "user", "content": ")" + std::string(1000, 'a') + R"("}]})", true);
  CHECK(chat.code == "context_length_exceeded");
  CHECK(chat.param == "messages");
}

TEST_CASE("request parser: defaults, token ids, stop strings, chat template") {
  const ByteTokenizer tok(256);
  const ApiLimits limits{"tiny", 256, 100};
  const CompletionParams p = parse_completion_request(
      R"({"prompt": [[5, 6, 7]], "stop": ["ab", "c"], "stream": true, "stream_options": {"include_usage": true}, "top_k": -1})",
      false, limits, tok);
  CHECK(p.prompt == std::vector<TokenId>{5, 6, 7});
  CHECK(p.max_tokens == 16);
  CHECK(p.temperature == 1.0f);
  CHECK(p.top_k == 0);
  CHECK(p.stop.size() == 2);
  CHECK(p.include_usage);
  const CompletionParams c = parse_completion_request(R"({"messages": [{"role": "user", "content": "hi"}]})", true,
                                                      limits, tok);
  const std::string text = chat_prompt_text({{"user", "hi"}});
  CHECK(text == "<|user|>\nhi\n<|assistant|>\n");
  CHECK(c.prompt.size() == text.size());
  CHECK(c.max_tokens == 100 - static_cast<std::int32_t>(text.size()));  // chat: the context left
}

TEST_CASE("metrics: Prometheus text with vLLM's names, cumulative buckets and the model label") {
  ServeMetrics m("tiny", 100);
  RequestRecord r;
  r.outcome = Outcome::finished;
  r.arrival = 0;
  r.first_scheduled = 10'000'000;  // queued 10 ms
  r.preemptions = 2;
  r.first_token = 30'000'000;  // 30 ms
  r.finish = 130'000'000;
  r.prompt_tokens = 7;
  r.output_tokens = 3;
  r.itl = {50'000'000, 50'000'000};
  m.on_request_end(r, "length");
  m.add_generation_tokens(3);
  const std::string text = m.render();
  CHECK(text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.02\"} 0") != std::string::npos);
  CHECK(text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.04\"} 1") != std::string::npos);
  CHECK(text.find("vllm:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 1") != std::string::npos);
  CHECK(text.find("vllm:inter_token_latency_seconds_count{model_name=\"tiny\"} 2") != std::string::npos);
  CHECK(text.find("vllm:prompt_tokens_total{model_name=\"tiny\"} 7") != std::string::npos);
  CHECK(text.find("vllm:generation_tokens_total{model_name=\"tiny\"} 3") != std::string::npos);
  CHECK(text.find("vllm:request_success_total{model_name=\"tiny\",finished_reason=\"length\"} 1") != std::string::npos);
  CHECK(text.find("# TYPE vllm:e2e_request_latency_seconds histogram") != std::string::npos);
  // vLLM's per-request set: queue, prefill, decode, inference, TPOT, token counts.
  CHECK(text.find("vllm:num_preemptions_total{model_name=\"tiny\"} 2") != std::string::npos);
  CHECK(text.find("vllm:request_queue_time_seconds_sum{model_name=\"tiny\"} 0.01\n") != std::string::npos);
  CHECK(text.find("vllm:request_prefill_time_seconds_sum{model_name=\"tiny\"} 0.02\n") != std::string::npos);
  CHECK(text.find("vllm:request_decode_time_seconds_sum{model_name=\"tiny\"} 0.1\n") != std::string::npos);
  CHECK(text.find("vllm:request_inference_time_seconds_sum{model_name=\"tiny\"} 0.12\n") != std::string::npos);
  CHECK(text.find("vllm:request_time_per_output_token_seconds_sum{model_name=\"tiny\"} 0.05\n") != std::string::npos);
  CHECK(text.find("vllm:request_prompt_tokens_bucket{model_name=\"tiny\",le=\"5\"} 0") != std::string::npos);
  CHECK(text.find("vllm:request_prompt_tokens_bucket{model_name=\"tiny\",le=\"10\"} 1") != std::string::npos);
  CHECK(text.find("le=\"200\"") == std::string::npos);  // buckets stop at max_model_len
}

TEST_CASE("examples/grafana-dashboard.json queries only series /metrics exposes") {
  std::ifstream in(std::string(TWIN_EXAMPLES_DIR) + "/grafana-dashboard.json");
  REQUIRE(in);
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  ServeMetrics m("tiny", 100);
  RequestRecord r;
  r.arrival = 0;
  r.first_scheduled = 1;
  r.first_token = 2;
  r.finish = 3;
  r.output_tokens = 2;
  r.itl = {1};
  m.on_request_end(r, "length");
  const std::string text = m.render();
  const std::regex series(R"(vllm:[a-z0-9_]+)");
  std::size_t checked = 0;
  for (const auto& panel : dashboard.at("panels")) {
    for (const auto& target : panel.at("targets")) {
      const std::string expr = target.at("expr").get<std::string>();
      CHECK(expr.find("model_name=\"$model_name\"") != std::string::npos);
      for (std::sregex_iterator it(expr.begin(), expr.end(), series), end; it != end; ++it) {
        INFO(panel.at("title").get<std::string>() << ": " << it->str());
        // Appended, not "\n" + ...: GCC 12's -Wstringop-overflow misfires on it.
        const std::string needle = std::string("\n").append(it->str()).append("{");
        CHECK(text.find(needle) != std::string::npos);
        ++checked;
      }
    }
  }
  CHECK(checked >= 20);
}

}  // namespace
}  // namespace twin
