#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "tests/traces/test_util.hpp"
#include "traces/trace_writer.hpp"

using namespace twin;
using namespace twin::test;

namespace {

std::vector<Request> sample_requests() {
  std::vector<Request> v(3);
  v[0].id = 0;
  v[0].arrival = 0;
  v[0].prompt_len = 5;
  v[0].output_len = 1;
  v[1].id = 7;
  v[1].arrival = 123'456'789'012'345;  // 1.4 days: beyond exact double seconds-to-ns
  v[1].prompt_len = 33;
  v[1].output_len = 4;
  v[1].priority = 2;
  v[1].session_id = 9;
  v[1].cancel_time = 123'457'000'000'001;
  v[1].hash_block_size = 16;
  v[1].hash_ids = {1, 18446744073709551615ull, 3};
  v[2].id = 8;
  v[2].arrival = 123'456'789'012'346;
  v[2].prompt_len = 3;
  v[2].output_len = 2;
  v[2].prompt_tokens = {0, 151000, 42};
  return v;
}

void check_same(const Request& a, const Request& b) {
  CHECK(a.id == b.id);
  CHECK(a.arrival == b.arrival);
  CHECK(a.prompt_len == b.prompt_len);
  CHECK(a.output_len == b.output_len);
  CHECK(a.priority == b.priority);
  CHECK(a.session_id == b.session_id);
  CHECK(a.cancel_time == b.cancel_time);
  CHECK(a.hash_block_size == b.hash_block_size);
  CHECK(a.hash_ids == b.hash_ids);
  CHECK(a.prompt_tokens == b.prompt_tokens);
}

}  // namespace

TEST_CASE("Own JSONL and CSV round-trip every field to the nanosecond", "[traces]") {
  for (const char* ext : {".jsonl", ".csv"}) {
    INFO(ext);
    TempFile a(ext), b(ext);
    const auto input = sample_requests();
    {
      TraceWriter w(a.path);
      for (const auto& r : input) w.write(r);
      w.close();
      CHECK(w.rows() == 3);
    }
    TraceReader reader(a.path);
    CHECK(reader.format() == (std::string(ext) == ".csv" ? TraceFormat::twin_csv : TraceFormat::twin_jsonl));
    std::vector<Request> back;
    Request r;
    while (reader.next(r)) back.push_back(r);
    REQUIRE(back.size() == input.size());
    for (std::size_t i = 0; i < input.size(); ++i) check_same(input[i], back[i]);
    // Writing what was read gives the same bytes.
    {
      TraceWriter w(b.path);
      for (const auto& q : back) w.write(q);
    }
    CHECK(read_file(a.path) == read_file(b.path));
  }
}

TEST_CASE("JSONL layout: fixed key order, 9 decimals, optional fields only when set", "[traces]") {
  Request r;
  r.id = 3;
  r.arrival = 1'500'000'000;
  r.prompt_len = 10;
  r.output_len = 2;
  std::string line;
  append_twin_jsonl(line, r);
  CHECK(line ==
        "{\"id\":3,\"arrival_s\":1.500000000,\"prompt_len\":10,\"output_len\":2,\"priority\":0,\"session_id\":-1}");
  line.clear();
  append_twin_csv(line, r);
  CHECK(line == "3,1.500000000,10,2,0,-1,,,,");
}

TEST_CASE("Writer refuses unknown extensions and, without overwrite, existing files", "[traces]") {
  CHECK_THROWS_AS(TraceWriter("/tmp/trace.txt"), UsageError);
  TempFile a(".jsonl");
  write_file(a.path, "x");
  CHECK_THROWS_WITH(TraceWriter(a.path, false), Catch::Contains(a.path) && Catch::Contains("--force"));
}

TEST_CASE("Converting a foreign trace keeps its requests", "[traces]") {
  TempFile out(".jsonl");
  {
    TraceWriter w(out.path);
    TraceReader in(fixture("mooncake.jsonl"));
    Request r;
    while (in.next(r)) w.write(r);
  }
  auto orig = read_all(fixture("mooncake.jsonl"));
  auto back = read_all(out.path);
  REQUIRE(back.size() == orig.size());
  for (std::size_t i = 0; i < orig.size(); ++i) check_same(orig[i], back[i]);
}
