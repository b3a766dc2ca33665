// The public formats added for planners (Azure 2024/2025, Splitwise-sim,
// Vidur length-only, LLMServingSim, ShareGPT, BurstGPT sessions), detection
// by column sets, and rows the simulator would refuse.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "tests/traces/test_util.hpp"
#include "traces/generator.hpp"
#include "traces/text_parse.hpp"
#include "traces/trace_reader.hpp"
#include "traces/trace_stats.hpp"

using namespace twin;
using namespace twin::test;

namespace {

TraceReadOptions with_rate(double rate, ArrivalKind kind = ArrivalKind::constant, std::uint64_t seed = 0) {
  TraceReadOptions o;
  o.arrivals.rate = rate;
  o.arrivals.kind = kind;
  o.arrivals.seed = seed;
  return o;
}

std::string error_of(const std::string& path, const TraceReadOptions& o = {}) {
  try {
    read_all(path, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("UTC offsets are subtracted exactly", "[traces][formats]") {
  Time utc = 0, t = 0;
  REQUIRE(parse_datetime_ns("2024-05-10 00:00:00.009930", utc));
  REQUIRE(parse_datetime_ns("2024-05-10 00:00:00.009930+00:00", t));
  CHECK(t == utc);
  REQUIRE(parse_datetime_ns("2024-05-10T00:00:00.009930Z", t));
  CHECK(t == utc);
  REQUIRE(parse_datetime_ns("2024-05-10 02:00:00.009930+02:00", t));
  CHECK(t == utc);
  REQUIRE(parse_datetime_ns("2024-05-09 19:30:00.009930-04:30", t));
  CHECK(t == utc);
  REQUIRE(parse_datetime_ns("2024-05-10 05:45:00.009930+0545", t));
  CHECK(t == utc);
  CHECK_FALSE(parse_datetime_ns("2024-05-10 00:00:00+24:00", t));
  CHECK_FALSE(parse_datetime_ns("2024-05-10 00:00:00+00:60", t));
  CHECK_FALSE(parse_datetime_ns("2024-05-10 00:00:00+0", t));
  CHECK_FALSE(parse_datetime_ns("2024-05-10 00:00:00 +00:00", t));
  CHECK_FALSE(parse_datetime_ns("2024-05-10 00:00:00+00:00x", t));

  std::string s;
  append_datetime_9(s, utc);
  CHECK(s == "2024-05-10 00:00:00.009930000");
  REQUIRE(parse_datetime_ns(s, t));
  CHECK(t == utc);
  s.clear();
  append_datetime_9(s, -1);
  CHECK(s == "1969-12-31 23:59:59.999999999");
}

TEST_CASE("Detection by the set of columns or keys, in any order, extras ignored", "[traces][formats]") {
  CHECK(detect_format("GeneratedTokens,TIMESTAMP,extra,ContextTokens") == TraceFormat::azure);
  CHECK(detect_format("TIMESTAMP,NumImages,ContextTokens,GeneratedTokens") == TraceFormat::azure);
  CHECK(detect_format("\"TIMESTAMP\",\"ContextTokens\",\"GeneratedTokens\"") == TraceFormat::azure);
  CHECK(detect_format("Model,Response tokens,Timestamp,Request tokens") == TraceFormat::burstgpt);
  CHECK(detect_format("request_id,request_type,application_id,arrival_timestamp,batch_size,prompt_size,token_size") ==
        TraceFormat::splitwise);
  CHECK(detect_format("num_decode_tokens,num_prefill_tokens,num_total_tokens") == TraceFormat::vidur_lengths);
  CHECK(detect_format("num_prefill_tokens,arrived_at,num_decode_tokens") == TraceFormat::vidur);
  CHECK(detect_format("{\"arrival_time_ns\": 5, \"output_toks\": 2, \"input_toks\": 3}") ==
        TraceFormat::llmservingsim);
  CHECK(detect_format("{\"id\": \"x\", \"conversations\": [{\"from\": \"human\", \"value\": \"hi\"}]}") ==
        TraceFormat::sharegpt);
  CHECK(detect_format("{\"messages\": []}") == TraceFormat::sharegpt);
  CHECK(detect_format("[") == TraceFormat::sharegpt);
  // A key inside a value does not name the format.
  CHECK(detect_format("{\"meta\": {\"input_length\": 1, \"timestamp\": 2}}") == TraceFormat::auto_detect);
  CHECK(detect_format("TIMESTAMP,ContextTokens") == TraceFormat::auto_detect);
  CHECK(parse_format_name("vidur-lengths") == TraceFormat::vidur_lengths);
  CHECK(parse_format_name("sharegpt") == TraceFormat::sharegpt);

  // Nothing matches: the error lists every format and what names it.
  TempFile tmp(".csv");
  write_file(tmp.path, "foo,bar\n1,2\n");
  const std::string msg = error_of(tmp.path);
  CHECK_THAT(msg, Catch::Contains(tmp.path + ":1: unrecognised trace format") &&
                      Catch::Contains("splitwise (arrival_timestamp,prompt_size,token_size)") &&
                      Catch::Contains("llmservingsim") && Catch::Contains("--format"));
  // Never raw binary.
  write_file(tmp.path, std::string("\x01\x02\xff\xfe,x\n1,2\n", 10));
  const std::string bin = error_of(tmp.path);
  CHECK_THAT(bin, Catch::Contains("\\x01\\x02\\xff\\xfe"));
  for (char c : bin) CHECK((c >= 0x20 && c < 0x7f));
}

TEST_CASE("Azure 2024 rows with UTC offsets and the 2025 multimodal header", "[traces][formats]") {
  auto rows = read_all(fixture("azure2024.csv"));
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].arrival == 0);
  CHECK(rows[1].arrival == 504'172'000);
  CHECK(rows[2].arrival == 990'070'000);    // 02:00:01+02:00
  CHECK(rows[3].arrival == 2'240'070'000);  // 19:30:02.25-04:30
  CHECK(rows[4].arrival == 2'990'070'000);  // ...T00:00:03Z
  CHECK(rows[0].prompt_len == 4808);
  CHECK(rows[4].output_len == 4);

  TraceReader mm(fixture("azure2025_multimodal.csv"));
  CHECK(mm.format() == TraceFormat::azure);
  std::vector<Request> m;
  Request r;
  while (mm.next(r)) m.push_back(r);
  REQUIRE(m.size() == 3);
  CHECK(m[1].arrival == 250'000'000);
  CHECK(m[2].arrival == 1'125'000'000);
  CHECK(m[0].prompt_len == 2012);  // NumImages is not a token count
  CHECK(m[2].output_len == 12);
}

TEST_CASE("Splitwise-sim CSV: seconds, prompt_size and token_size", "[traces][formats]") {
  TraceReader reader(fixture("splitwise.csv"));
  CHECK(reader.format() == TraceFormat::splitwise);
  std::vector<Request> rows;
  Request r;
  while (reader.next(r)) rows.push_back(r);
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].arrival == 125'000'000);
  CHECK(rows[1].prompt_len == 374);
  CHECK(rows[1].output_len == 44);
  CHECK(rows[2].arrival == 1'500'000'000);
}

TEST_CASE("Vidur length-only CSV: arrivals from a rate, required", "[traces][formats]") {
  const std::string path = fixture("vidur_lengths.csv");
  CHECK_THAT(error_of(path), Catch::Contains(path) && Catch::Contains("no arrival times") && Catch::Contains("--rate"));
  auto rows = read_all(path, with_rate(4));
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].arrival == 0);
  CHECK(rows[1].arrival == 250'000'000);
  CHECK(rows[2].arrival == 500'000'000);
  CHECK(rows[0].prompt_len == 254);
  CHECK(rows[2].output_len == 512);

  // Poisson arrivals are those `trace generate` draws for the same rate and seed.
  auto poisson = read_all(path, with_rate(3, ArrivalKind::poisson, 7));
  GeneratorOptions g;
  g.rate = 3;
  g.seed = 7;
  g.max_requests = 3;
  TraceGenerator gen(g);
  Request r;
  for (const Request& row : poisson) {
    REQUIRE(gen.next(r));
    CHECK(row.arrival == r.arrival);
  }
  CHECK(poisson[1].arrival != poisson[2].arrival);

  // A rate for a trace with its own times is refused, not ignored.
  CHECK_THROWS_AS(read_all(fixture("vidur.csv"), with_rate(4)), UsageError);
}

TEST_CASE("LLMServingSim JSONL: ns arrivals, prompt token ids", "[traces][formats]") {
  TraceReader reader(fixture("llmservingsim.jsonl"));
  CHECK(reader.format() == TraceFormat::llmservingsim);
  std::vector<Request> rows;
  Request r;
  while (reader.next(r)) rows.push_back(r);
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].arrival == 1'026'970'077 - 570'907'776);
  CHECK(rows[2].arrival == 1'500'000'000 - 570'907'776);
  CHECK(rows[0].prompt_len == 4);
  CHECK(rows[0].output_len == 12);
  CHECK(rows[0].prompt_tokens == std::vector<TokenId>{1, 1, 235, 236});
  CHECK(rows[2].prompt_tokens.empty());

  TempFile tmp(".jsonl");
  write_file(tmp.path, "{\"input_toks\":3,\"output_toks\":1,\"arrival_time_ns\":0,\"input_tok_ids\":[1,2]}\n");
  CHECK_THAT(error_of(tmp.path), Catch::Contains(":1: prompt_tokens holds 2 tokens but prompt_len is 3"));
  write_file(tmp.path, "{\"input_toks\":2,\"output_toks\":1,\"arrival_time_ns\":0,\"input_tok_ids\":[1,-2]}\n");
  CHECK_THAT(error_of(tmp.path), Catch::Contains(":1: 'input_tok_ids' holds a value outside"));
}

TEST_CASE("ShareGPT conversations: turns, sessions, byte-estimated tokens, content-named blocks", "[traces][formats]") {
  const std::string path = fixture("sharegpt.json");
  CHECK_THAT(error_of(path), Catch::Contains("no arrival times"));
  TraceReader reader(path, with_rate(2));
  CHECK(reader.format() == TraceFormat::sharegpt);
  std::vector<Request> rows;
  Request r;
  while (reader.next(r)) rows.push_back(r);
  REQUIRE(rows.size() == 4);
  // conv_a: a 62-byte question is 16 tokens; "Paris." 2.
  CHECK(rows[0].prompt_len == 16);
  CHECK(rows[0].output_len == 2);
  // Turn 2: the whole conversation so far plus "And of Italy?" (13 bytes, 4 tokens).
  CHECK(rows[1].prompt_len == 16 + 2 + 4);
  CHECK(rows[1].output_len == 16);
  CHECK(rows[0].session_id == 0);
  CHECK(rows[1].session_id == 0);
  // conv_b opens as conv_a did: the same first block; an empty reply is 1 token.
  CHECK(rows[2].session_id == 1);
  CHECK(rows[2].output_len == 1);
  REQUIRE(rows[0].hash_ids.size() == 1);
  CHECK(rows[0].hash_block_size == 16);
  CHECK(rows[2].hash_ids == rows[0].hash_ids);
  CHECK(rows[1].hash_ids == rows[0].hash_ids);
  // conv_c has no reply (no request); conv_d: system + user context, UTF-8 bytes.
  CHECK(rows[3].session_id == 2);
  CHECK(rows[3].prompt_len == 3 + 2);  // "Be brief." 9 bytes, "Hi été" 8 bytes
  CHECK(rows[3].output_len == 2);
  CHECK(rows[3].hash_ids.empty());
  CHECK(rows[1].arrival == 500'000'000);

  auto chat = read_all(fixture("sharegpt_messages.jsonl"), with_rate(1));
  REQUIRE(chat.size() == 2);
  CHECK(chat[0].prompt_len == 4);   // "Count to three." 15 bytes
  CHECK(chat[0].output_len == 4);   // "One, two, three." 16 bytes
  CHECK(chat[1].prompt_len == 1);   // a null system message adds nothing
  CHECK(chat[1].session_id == 1);
}

TEST_CASE("ShareGPT: malformed conversations are row errors naming the line", "[traces][formats]") {
  TempFile tmp(".json");
  auto err = [&](const std::string& text) {
    write_file(tmp.path, text);
    return error_of(tmp.path, with_rate(1));
  };
  CHECK_THAT(err("[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}, {\"from\": \"gpt\", \"value\": \"b\"}]},\n"
                 "{\"conversations\": \"oops\"}\n]"),
             Catch::Contains(":3: 'conversations' must be an array of messages"));
  CHECK_THAT(err("[{\"conversations\": [{\"value\": \"a\"}]}]"), Catch::Contains(":1: message 1 has no 'from'"));
  CHECK_THAT(err("[{\"conversations\": [{\"from\": \"human\", \"value\": 3}]}]"),
             Catch::Contains("message field 'value' must be a string"));
  CHECK_THAT(err("[{\"id\": 1}]"), Catch::Contains("needs a 'conversations'"));
  // A key given twice is refused, never last-wins: in the conversation and
  // in a message; a second object may reuse the first one's keys.
  CHECK_THAT(err("[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}], \"conversations\": []}]"),
             Catch::Contains(":1: key 'conversations' given twice (a duplicate key)"));
  CHECK_THAT(err("[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\", \"value\": \"bb\"}]}]"),
             Catch::Contains("message 1: key 'value' given twice"));
  write_file(tmp.path, "[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}, {\"from\": \"gpt\", "
                       "\"value\": \"b\"}]}, {\"conversations\": [{\"from\": \"human\", \"value\": \"c\"}, "
                       "{\"from\": \"gpt\", \"value\": \"d\"}]}]");
  CHECK(read_all(tmp.path, with_rate(1)).size() == 2);
  CHECK_THAT(err("[{\"conversations\": []},"), Catch::Contains("does not close"));
  CHECK_THAT(err("[{\"conversations\": []}] x"), Catch::Contains("after the JSON array"));
  CHECK_THAT(err("[]"), Catch::Contains("holds no requests"));
  // Skipped with --on-bad-row skip, and counted.
  write_file(tmp.path,
             "[{\"conversations\": 5}, {\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}, {\"from\": \"gpt\", "
             "\"value\": \"b\"}]}]");
  TraceReadOptions skip = with_rate(1);
  skip.on_bad_row = BadRowPolicy::skip;
  TraceReader lenient(tmp.path, skip);
  Request r;
  REQUIRE(lenient.next(r));
  CHECK_FALSE(lenient.next(r));
  CHECK(lenient.report().skipped_bad == 1);
  CHECK(r.session_id == 0);
}

TEST_CASE("BurstGPT Session ID is the request's session", "[traces][formats]") {
  auto rows = read_all(fixture("burstgpt_v2.csv"));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].session_id >= 0);
  CHECK(rows[0].session_id == rows[1].session_id);
  TempFile tmp(".csv");
  write_file(tmp.path, "Timestamp,Session ID,Model,Request tokens,Response tokens\n0,17,ChatGPT,10,5\n1,,ChatGPT,10,5\n"
                       "2,b7,ChatGPT,10,5\n");
  auto r = read_all(tmp.path);
  REQUIRE(r.size() == 3);
  CHECK(r[0].session_id == 17);
  CHECK(r[1].session_id == -1);
  CHECK(r[2].session_id >= 0);
  CHECK(r[2].session_id != r[0].session_id);
}

TEST_CASE("Rows with 0 prompt tokens are refused at read time, or skipped and counted", "[traces][formats]") {
  TempFile tmp(".csv");
  write_file(tmp.path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00+00:00,10,5\n"
                       "2024-05-10 00:00:01+00:00,0,5\n2024-05-10 00:00:02+00:00,7,5\n");
  CHECK_THAT(error_of(tmp.path), Catch::Contains(":3: prompt length 0"));
  TraceReadOptions skip;
  skip.on_bad_row = BadRowPolicy::skip;
  TraceReader reader(tmp.path, skip);
  const TraceStats st = compute_stats(reader);
  CHECK(st.num_requests == 2);
  CHECK(reader.report().skipped_bad == 1);
  // BurstGPT failures (0 response tokens) stay failures, whatever the prompt.
  write_file(tmp.path, "Timestamp,Model,Request tokens,Response tokens\n0,ChatGPT,0,0\n1,ChatGPT,3,1\n");
  TraceReader burst(tmp.path);
  const TraceStats b = compute_stats(burst);
  CHECK(b.num_requests == 1);
  CHECK(burst.report().skipped_failed == 1);
}
