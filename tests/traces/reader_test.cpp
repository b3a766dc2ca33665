#include <catch2/catch.hpp>

#include <array>
#include <filesystem>

#include "base/error.hpp"
#include "tests/support/skip.hpp"
#include "tests/traces/test_util.hpp"
#include "traces/text_parse.hpp"
#include "traces/trace_reader.hpp"
#include "traces/trace_stats.hpp"

using namespace twin;
using namespace twin::test;

TEST_CASE("text parsing: exact decimal times and datetimes", "[traces]") {
  Time t = 0;
  REQUIRE(parse_decimal_time("1.000000001", kNsPerSec, t));
  CHECK(t == 1'000'000'001);
  REQUIRE(parse_decimal_time("0.0000000015", kNsPerSec, t));
  CHECK(t == 2);  // rounded half up below 1 ns
  REQUIRE(parse_decimal_time("27493.5", kNsPerMs, t));
  CHECK(t == 27'493'500'000);
  REQUIRE(parse_decimal_time("-2.5", kNsPerSec, t));
  CHECK(t == -2'500'000'000);
  REQUIRE(parse_decimal_time("1.5e3", kNsPerSec, t));
  CHECK(t == 1'500'000'000'000);
  CHECK_FALSE(parse_decimal_time("", kNsPerSec, t));
  CHECK_FALSE(parse_decimal_time("1.2.3", kNsPerSec, t));
  CHECK_FALSE(parse_decimal_time("abc", kNsPerSec, t));
  CHECK_FALSE(parse_decimal_time(".", kNsPerSec, t));

  Time a = 0, b = 0;
  REQUIRE(parse_datetime_ns("2023-11-16 18:15:46.6805900", a));
  REQUIRE(parse_datetime_ns("2023-11-17 00:00:00", b));
  CHECK(b - a == (5 * 3600 + 44 * 60 + 13) * kNsPerSec + 319'410'000);
  REQUIRE(parse_datetime_ns("1970-01-01 00:00:01", a));
  CHECK(a == kNsPerSec);
  CHECK_FALSE(parse_datetime_ns("2023-13-16 18:15:46", a));
  CHECK_FALSE(parse_datetime_ns("2023-11-16 18:15", a));
  CHECK_FALSE(parse_datetime_ns("2023-02-30 00:00:00", a));  // no such day
  CHECK_FALSE(parse_datetime_ns("2023-04-31 00:00:00", a));
  REQUIRE(parse_datetime_ns("2024-02-29 00:00:00", a));        // leap year
  CHECK_FALSE(parse_datetime_ns("2023-02-29 00:00:00", a));
  CHECK_FALSE(parse_datetime_ns("0001-01-01 00:00:00", a));    // before int64 ns reach
  CHECK_FALSE(parse_datetime_ns("9999-12-31 23:59:59", a));

  std::string s;
  append_seconds_9(s, 1'000'000'001);
  CHECK(s == "1.000000001");
  s.clear();
  append_seconds_9(s, -5);
  CHECK(s == "-0.000000005");
}

TEST_CASE("format detection from the first line", "[traces]") {
  CHECK(detect_format("TIMESTAMP,ContextTokens,GeneratedTokens") == TraceFormat::azure);
  CHECK(detect_format("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type") ==
        TraceFormat::burstgpt);
  CHECK(detect_format("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens") ==
        TraceFormat::burstgpt);
  CHECK(detect_format("arrived_at,num_prefill_tokens,num_decode_tokens") == TraceFormat::vidur);
  CHECK(detect_format("{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3}") == TraceFormat::mooncake);
  CHECK(detect_format("{\"chat_id\": 1, \"timestamp\": 1, \"input_length\": 2}") == TraceFormat::bailian);
  CHECK(detect_format("{\"id\":0,\"arrival_s\":0.000000000}") == TraceFormat::twin_jsonl);
  CHECK(detect_format("id,arrival_s,prompt_len,output_len") == TraceFormat::twin_csv);
  CHECK(detect_format("a,b,c") == TraceFormat::auto_detect);
  CHECK(parse_format_name("burstgpt") == TraceFormat::burstgpt);
  CHECK_THROWS_AS(parse_format_name("nope"), UsageError);
}

TEST_CASE("Azure CSV: absolute timestamps rebased to 0, CRLF and no final newline", "[traces]") {
  TraceReader reader(fixture("azure.csv"));
  CHECK(reader.format() == TraceFormat::azure);
  std::vector<Request> rows;
  Request r;
  while (reader.next(r)) rows.push_back(r);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].id == 0);
  CHECK(rows[0].arrival == 0);
  CHECK(rows[0].prompt_len == 374);
  CHECK(rows[0].output_len == 44);
  CHECK(rows[1].id == 1);
  CHECK(rows[1].arrival == 4'314'579'000);
  CHECK(rows[1].output_len == 109);
  CHECK(rows[2].arrival == 4'319'410'000);
  CHECK(reader.report().rows == 3);
}

TEST_CASE("BurstGPT: failed rows skipped and counted unless kept", "[traces]") {
  TraceReader reader(fixture("burstgpt.csv"));
  CHECK(reader.format() == TraceFormat::burstgpt);
  Request r;
  std::vector<Request> rows;
  while (reader.next(r)) rows.push_back(r);
  REQUIRE(rows.size() == 2);
  CHECK(reader.report().skipped_failed == 1);
  CHECK(rows[0].arrival == 0);
  CHECK(rows[1].arrival == 113 * kNsPerSec);
  CHECK(rows[1].id == 1);
  CHECK(rows[1].prompt_len == 417);

  TraceReadOptions keep;
  keep.keep_failed = true;
  auto all = read_all(fixture("burstgpt.csv"), keep);
  REQUIRE(all.size() == 3);
  CHECK(all[1].output_len == 0);

  auto v2 = read_all(fixture("burstgpt_v2.csv"));
  REQUIRE(v2.size() == 2);
  CHECK(v2[1].arrival == 2'250'000'000);
  CHECK(v2[1].prompt_len == 200);
  CHECK(v2[1].output_len == 30);
}

TEST_CASE("Mooncake JSONL: ms timestamps, hash ids, configurable block size", "[traces]") {
  auto rows = read_all(fixture("mooncake.jsonl"));
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].arrival == 11 * kNsPerMs);
  CHECK(rows[2].arrival == 11'500'000);
  CHECK(rows[0].hash_ids == std::vector<std::uint64_t>{0, 1});
  CHECK(rows[0].hash_block_size == 512);
  CHECK(rows[2].prompt_len == 600);
  TraceReadOptions o;
  o.hash_block_size = 256;
  CHECK(read_all(fixture("mooncake.jsonl"), o)[0].hash_block_size == 256);

  TraceReader reader(fixture("mooncake.jsonl"));
  const TraceStats st = compute_stats(reader);
  REQUIRE(st.has_hash_ids);
  // Only block 0 of request 1 repeats: 512 of 1024 + 700 + 600 tokens.
  CHECK(st.prefix_cache_share == Approx(512.0 / 2324.0));
}

TEST_CASE("Bailian JSONL: seconds, sessions follow parent_chat_id", "[traces]") {
  TraceReader reader(fixture("bailian.jsonl"));
  CHECK(reader.format() == TraceFormat::bailian);
  std::vector<Request> rows;
  Request r;
  while (reader.next(r)) rows.push_back(r);
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].arrival == 14'386'000'000);
  CHECK(rows[0].session_id == 159);
  CHECK(rows[1].session_id == 159);
  CHECK(rows[2].session_id == 161);
  CHECK(rows[0].hash_block_size == 16);
}

TEST_CASE("Vidur CSV: seconds, extra columns ignored", "[traces]") {
  auto rows = read_all(fixture("vidur.csv"));
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].arrival == 250'000'000);
  CHECK(rows[2].prompt_len == 300);
  CHECK(rows[2].output_len == 30);
}

TEST_CASE("Bad rows: file:line errors, or skipped and counted", "[traces]") {
  const std::string path = fixture("bad_azure.csv");
  TraceReader reader(path);
  Request r;
  REQUIRE(reader.next(r));
  try {
    reader.next(r);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("bad_azure.csv:3:") != std::string::npos);
    CHECK(msg.find("ContextTokens") != std::string::npos);
    CHECK(msg.find("abc") != std::string::npos);
  }

  TraceReadOptions skip;
  skip.on_bad_row = BadRowPolicy::skip;
  TraceReader lenient(path, skip);
  std::vector<Request> rows;
  while (lenient.next(r)) rows.push_back(r);
  REQUIRE(rows.size() == 2);
  CHECK(rows[1].id == 1);
  CHECK(rows[1].arrival == 2'819'410'000);
  CHECK(lenient.report().skipped_bad == 4);
  CHECK(lenient.report().first_bad_row.find(":3:") != std::string::npos);

  // Each problem names its line.
  auto message_of_line = [&](int line) {
    TraceReadOptions o;
    o.on_bad_row = BadRowPolicy::skip;
    std::vector<std::string> lines;
    std::string text = read_file(path);
    std::string head = text.substr(0, text.find('\n') + 1);
    std::string first_row = "2023-11-16 18:15:46.6805900,374,44\n";
    std::size_t pos = 0;
    for (int i = 1; i < line; ++i) pos = text.find('\n', pos) + 1;
    std::string row = text.substr(pos, text.find('\n', pos) - pos + 1);
    TempFile tmp(".csv");
    write_file(tmp.path, head + first_row + row);
    try {
      read_all(tmp.path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message_of_line(4).find(":3: expected 3 fields") != std::string::npos);
  CHECK(message_of_line(5).find(":3: negative prompt length") != std::string::npos);
  CHECK(message_of_line(6).find(":3: arrival goes backwards") != std::string::npos);

  // Within the tolerance a slightly early row is clamped and counted.
  TraceReadOptions tolerant;
  tolerant.backwards_tolerance_s = 5.0;
  tolerant.on_bad_row = BadRowPolicy::skip;
  TraceReader t(path, tolerant);
  std::int64_t n = 0;
  Time prev = 0;
  while (t.next(r)) {
    CHECK(r.arrival >= prev);
    prev = r.arrival;
    ++n;
  }
  CHECK(n == 3);
  CHECK(t.report().reordered == 1);
}

TEST_CASE("Bad JSON lines name file, line and problem", "[traces]") {
  const std::string path = fixture("bad.jsonl");
  TraceReader reader(path);
  Request r;
  REQUIRE(reader.next(r));
  CHECK_THROWS_WITH(reader.next(r), Catch::Contains("bad.jsonl:2:") && Catch::Contains("invalid JSON"));

  TraceReadOptions skip;
  skip.on_bad_row = BadRowPolicy::skip;
  TraceReader lenient(path, skip);
  std::int64_t n = 0;
  while (lenient.next(r)) ++n;
  CHECK(n == 2);
  CHECK(lenient.report().skipped_bad == 3);

  TempFile tmp(".jsonl");
  write_file(tmp.path, "{\"timestamp\": 6, \"output_length\": 1, \"input_length\": 4}\n"
                       "{\"timestamp\": 7, \"input_length\": \"ten\", \"output_length\": 1}\n");
  TraceReader r2(tmp.path);
  REQUIRE(r2.next(r));
  CHECK_THROWS_WITH(r2.next(r), Catch::Contains(":2:") && Catch::Contains("'input_length' must be a number"));
  // A field given twice (last-wins before) names the line and the key;
  // two spellings of one field too.
  write_file(tmp.path, "{\"id\": 0, \"arrival_s\": 0, \"prompt_len\": 8, \"output_len\": 2}\n"
                       "{\"id\": 1, \"arrival_s\": 1, \"prompt_len\": 8, \"output_len\": 2, \"prompt_len\": 9000}\n"
                       "{\"id\": 2, \"arrival_s\": 2, \"prompt_len\": 8, \"output_len\": 2, \"x\": 1, \"x\": 2}\n");
  TraceReader twice(tmp.path);
  REQUIRE(twice.next(r));
  CHECK_THROWS_WITH(twice.next(r), Catch::Contains(":2:") && Catch::Contains("'prompt_len' given twice"));
  write_file(tmp.path, "{\"input_toks\": 4, \"output_toks\": 1, \"arrival_time_ns\": 0, \"input_tok_ids\": [1, 2],"
                       " \"prompt_tokens\": [3]}\n");
  TraceReader spellings(tmp.path);
  CHECK_THROWS_WITH(spellings.next(r), Catch::Contains(":1:") && Catch::Contains("given twice"));
  write_file(tmp.path, "{\"timestamp\": 6, \"output_length\": 1}\n");
  TraceReadOptions mooncake;
  mooncake.format = TraceFormat::mooncake;
  TraceReader r3(tmp.path, mooncake);
  CHECK_THROWS_WITH(r3.next(r), Catch::Contains(":1: missing field 'input_length'"));
}

TEST_CASE("Out-of-range values, duplicate ids and early cancels are row errors", "[traces]") {
  TempFile tmp(".jsonl");
  auto error_of = [&](const std::string& text) {
    write_file(tmp.path, text);
    try {
      read_all(tmp.path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string row0 = "{\"id\":0,\"arrival_s\":0.0,\"prompt_len\":10,\"output_len\":5}\n";
  // Ids key the results: a repeat is an error, in any order.
  CHECK_THAT(error_of(row0 + "{\"id\":0,\"arrival_s\":1.0,\"prompt_len\":10,\"output_len\":5}\n"),
             Catch::Contains(":2: id 0 appears twice"));
  CHECK_THAT(error_of("{\"id\":5,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n"
                      "{\"id\":3,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n"
                      "{\"id\":4,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n"
                      "{\"id\":6,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n"
                      "{\"id\":4,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n"),
             Catch::Contains(":5: id 4 appears twice"));
  write_file(tmp.path, "{\"id\":2,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n"
                       "{\"id\":0,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n"
                       "{\"id\":1,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n"
                       "{\"id\":-9223372036854775808,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n"
                       "{\"id\":9223372036854775807,\"arrival_s\":0,\"prompt_len\":1,\"output_len\":1}\n");
  CHECK(read_all(tmp.path).size() == 5);
  // A cancel before the arrival.
  CHECK_THAT(error_of(row0 + "{\"id\":1,\"arrival_s\":1.0,\"prompt_len\":10,\"output_len\":5,\"cancel_s\":0.5}\n"),
             Catch::Contains(":2: cancel_s 0.500000000 is before the arrival 1.000000000"));
  // Mooncake ms timestamps at the ends of int64; rebasing must not overflow.
  CHECK_THAT(error_of("{\"timestamp\":-9223372036854775808,\"input_length\":10,\"output_length\":5}\n"),
             Catch::Contains(":1: field 'timestamp' is out of range"));
  TempFile csv(".csv");
  write_file(csv.path, "arrived_at,num_prefill_tokens,num_decode_tokens\n-9000000000,10,5\n9000000000,10,5\n");
  CHECK_THROWS_WITH(read_all(csv.path), Catch::Contains(":3: arrival time is out of range"));
  // CSV prompt tokens are token ids, as in JSONL.
  write_file(csv.path, "id,arrival_s,prompt_len,output_len,prompt_tokens\n0,0,3,5,1 2 -3\n");
  CHECK_THROWS_WITH(read_all(csv.path), Catch::Contains(":2: field 'prompt_tokens'"));
  // Impossible or unreachable dates.
  write_file(csv.path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-30 00:00:00,10,5\n");
  CHECK_THROWS_WITH(read_all(csv.path), Catch::Contains(":2: field 'TIMESTAMP'"));
  write_file(csv.path, "TIMESTAMP,ContextTokens,GeneratedTokens\n0001-01-01 00:00:00,10,5\n");
  CHECK_THROWS_WITH(read_all(csv.path), Catch::Contains(":2: field 'TIMESTAMP'"));
}

TEST_CASE("Missing file, empty file and unknown format are errors naming the path", "[traces]") {
  CHECK_THROWS_WITH(TraceReader(std::string(TWIN_SOURCE_DIR) + "/tests/traces/fixtures"),
                    Catch::Contains("fixtures") && Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(TraceReader("/nonexistent/trace.csv"), Catch::Contains("/nonexistent/trace.csv"));
  TempFile tmp(".csv");
  write_file(tmp.path, "");
  CHECK_THROWS_WITH(TraceReader(tmp.path), Catch::Contains(tmp.path) && Catch::Contains("empty"));
  write_file(tmp.path, "foo,bar\n1,2\n");
  CHECK_THROWS_WITH(TraceReader(tmp.path), Catch::Contains(tmp.path + ":1:") && Catch::Contains("azure"));
  TraceReadOptions forced;
  forced.format = TraceFormat::vidur;
  CHECK_THROWS_WITH(TraceReader(tmp.path, forced), Catch::Contains("lacks column 'arrived_at'"));

  // A header without rows, or rows that are all skipped, yields no request:
  // an error at the end of the file, not an empty run that exits 0.
  write_file(tmp.path, "TIMESTAMP,ContextTokens,GeneratedTokens\n");
  TraceReader header_only(tmp.path);
  Request r;
  CHECK_THROWS_WITH(header_only.next(r), Catch::Contains(tmp.path) && Catch::Contains("holds no requests"));
  write_file(tmp.path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,abc,44\n");
  TraceReadOptions skip;
  skip.on_bad_row = BadRowPolicy::skip;
  TraceReader all_bad(tmp.path, skip);
  CHECK_THROWS_WITH(all_bad.next(r), Catch::Contains("holds no requests") && Catch::Contains("1 bad rows skipped") &&
                                         Catch::Contains(":2:"));
}

TEST_CASE("Real Azure 2023 traces parse with the published counts", "[traces][real]") {
  // The development data (../shared) is not on a user's machine: the case
  // skips, naming the missing file, rather than pass having read nothing.
  const std::string dir = std::string(TWIN_SHARED_DIR) + "/traces/";
  const std::array<std::pair<const char*, std::int64_t>, 2> traces{{{"azure2023_code.csv", 8819},
                                                                    {"azure2023_conv.csv", 19366}}};
  for (auto [name, count] : traces)
    if (!std::filesystem::exists(dir + name)) TWIN_SKIP(dir + name << " is absent (the development data)");
  for (auto [name, count] : traces) {
    const std::string path = dir + name;
    TraceReader reader(path);
    const TraceStats st = compute_stats(reader);
    INFO(name);
    CHECK(reader.format() == TraceFormat::azure);
    CHECK(st.num_requests == count);
    CHECK(reader.report().skipped_bad == 0);
    // One hour of traffic.
    CHECK(st.span_s > 3300);
    CHECK(st.span_s < 3600);
    CHECK(st.mean_rate == Approx(static_cast<double>(count - 1) / st.span_s));
    CHECK(st.prompt_tokens.p50 > 100);
    CHECK(st.prompt_tokens.p50 <= st.prompt_tokens.p90);
    CHECK(st.prompt_tokens.p90 <= st.prompt_tokens.p99);
    CHECK(st.prompt_tokens.p99 <= st.prompt_tokens.max);
    CHECK(st.output_tokens.mean > 1);
    CHECK_FALSE(st.has_hash_ids);
    if (count == 19366) {
      // Reference figures computed independently (Python csv module).
      CHECK(st.prompt_tokens.mean == Approx(1154.6974).epsilon(1e-6));
      CHECK(st.prompt_tokens.p50 == 1020);
      CHECK(st.prompt_tokens.p99 == 4142);
      CHECK(st.prompt_tokens.max == 14050);
    }
  }
}
