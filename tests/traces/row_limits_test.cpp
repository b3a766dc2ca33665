// One trace row may be up to 256 MiB (the line cap), but its hash id and
// token lists are capped at 2^24 elements (kMaxRowListElements), so one row
// never becomes gigabytes of vectors: past the cap it is a FILE:LINE error
// naming the key. ShareGPT conversations hold their messages' text, not a
// record per message.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.hpp"
#include "tests/traces/test_util.hpp"
#include "traces/line_reader.hpp"
#include "traces/trace_reader.hpp"

using namespace twin;
using namespace twin::test;

namespace {

// "1<sep>1<sep>...1": n ones.
std::string ones(std::size_t n, char sep) {
  std::string s;
  s.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += sep;
    s += '1';
  }
  return s;
}

std::string read_error(const std::string& path, const TraceReadOptions& o = {}) {
  try {
    read_all(path, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("row lists: more than 2^24 hash ids or tokens is a FILE:LINE error naming the key", "[traces]") {
  const std::size_t over = kMaxRowListElements + 1;
  const std::string hash_list = ones(over, ',');
  struct Case {
    std::string text, format, key;
    int line = 2;  // the row's line (CSV: after the header)
  };
  const Case cases[] = {
      {R"({"id":0,"arrival_s":0,"prompt_len":4,"output_len":1}
{"id":1,"arrival_s":0,"prompt_len":4,"output_len":1,"hash_block_size":16,"hash_ids":[)" + hash_list + "]}\n",
       "twin-jsonl", "'hash_ids' holds more than 16777216 elements"},
      {R"({"id":0,"arrival_s":0,"prompt_len":4,"output_len":1}
{"id":1,"arrival_s":0,"prompt_len":4,"output_len":1,"prompt_tokens":[)" + hash_list + "]}\n",
       "twin-jsonl", "'prompt_tokens' holds more than 16777216 elements"},
      {R"({"timestamp":0,"input_length":4,"output_length":1}
{"timestamp":1,"input_length":4,"output_length":1,"hash_ids":[)" + hash_list + "]}\n",
       "mooncake", "'hash_ids' holds more than 16777216 elements"},
      {R"({"arrival_time_ns":0,"input_toks":1,"output_toks":1,"input_tok_ids":[1]}
{"arrival_time_ns":1,"input_toks":4,"output_toks":1,"input_tok_ids":[)" + hash_list + "]}\n",
       "llmservingsim", "'input_tok_ids' holds more than 16777216 elements"},
      {"id,arrival_s,prompt_len,output_len,hash_block_size,hash_ids\n0,0,4,1,,\n1,0,4,1,16," + ones(over, ' ') + "\n",
       "twin-csv", "field 'hash_ids': holds more than 16777216 elements", 3},
      {"id,arrival_s,prompt_len,output_len,prompt_tokens\n0,0,4,1,\n1,0,4,1," + ones(over, ' ') + "\n", "twin-csv",
       "field 'prompt_tokens': holds more than 16777216 elements", 3},
  };
  for (const Case& c : cases) {
    INFO(c.format << ": " << c.key);
    TempFile f(".trace");
    write_file(f.path, c.text);
    TraceReadOptions o;
    o.format = parse_format_name(c.format);
    const std::string what = read_error(f.path, o);
    CHECK_THAT(what, Catch::StartsWith(f.path + ":" + std::to_string(c.line) + ": "));
    CHECK_THAT(what, Catch::Contains(c.key));
    CHECK(what.size() < 300);
  }
}

TEST_CASE("row lists: exactly 2^24 prompt tokens is still a row", "[traces]") {
  const std::size_t n = kMaxRowListElements;
  TempFile f(".jsonl");
  write_file(f.path, R"({"id":0,"arrival_s":0,"prompt_len":)" + std::to_string(n) + R"(,"output_len":1,"prompt_tokens":[)" +
                         ones(n, ',') + "]}\n");
  const std::vector<Request> rows = read_all(f.path);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].prompt_tokens.size() == n);
}

TEST_CASE("ShareGPT: a conversation of two million messages reads without a record per message", "[traces]") {
  // 2^21 one-byte questions, then a reply: a record per message would have
  // been ~150 MB; the context is 4 bytes (one token) per message.
  constexpr int kMessages = 1 << 21;
  std::string text = R"([{"conversations":[)";
  text.reserve(static_cast<std::size_t>(kMessages) * 30);
  for (int i = 0; i < kMessages; ++i) text += R"({"from":"human","value":"q"},)";
  text += R"({"from":"gpt","value":"a"}]}]
)";
  TempFile f(".json");
  write_file(f.path, text);
  TraceReadOptions o;
  o.format = TraceFormat::sharegpt;
  o.arrivals.rate = 10;
  const std::vector<Request> rows = read_all(f.path, o);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].prompt_len == kMessages);
  CHECK(rows[0].hash_ids.size() == kMessages / 16);
}
