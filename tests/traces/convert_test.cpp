// `trace convert --to`: each target format read back holds what it can
// (times to the ns, lengths, and Mooncake's hash ids), and says what it lost.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <sys/wait.h>

#include "tests/traces/test_util.hpp"
#include "traces/trace_writer.hpp"
#include "tests/support/skip.hpp"

using namespace twin;
using namespace twin::test;

namespace {

std::vector<Request> sample_requests() {
  std::vector<Request> out;
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.id = i;
    r.arrival = i * 1'234'567'891LL + (i == 3 ? 7 : 0);  // ns precision
    r.prompt_len = 40 + i;
    r.output_len = 5 + i;
    out.push_back(r);
  }
  out[0].hash_ids = {7, 8};
  out[0].hash_block_size = 16;
  out[1].session_id = 3;
  out[1].priority = 2;
  out[1].cancel_time = out[1].arrival + 500;
  out[2].prompt_tokens.assign(42, 9);
  return out;
}

// Writes the sample in `format`, reads it back with `read`.
std::vector<Request> round_trip(TraceFormat format, const TraceReadOptions& read, std::string* losses = nullptr) {
  TempFile file(".out");
  TraceWriter writer(file.path, format, true);
  for (const Request& r : sample_requests()) writer.write(r);
  writer.close();
  if (losses) *losses = writer.losses();
  return read_all(file.path, read);
}

void check_core(const std::vector<Request>& got) {
  const auto want = sample_requests();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("request " << i);
    CHECK(got[i].id == want[i].id);
    CHECK(got[i].arrival == want[i].arrival);
    CHECK(got[i].prompt_len == want[i].prompt_len);
    CHECK(got[i].output_len == want[i].output_len);
  }
}

}  // namespace

TEST_CASE("convert to our JSONL and CSV keeps every field", "[traces][convert]") {
  for (TraceFormat f : {TraceFormat::twin_jsonl, TraceFormat::twin_csv}) {
    std::string lost;
    const auto got = round_trip(f, {}, &lost);
    check_core(got);
    CHECK(lost.empty());
    const auto want = sample_requests();
    for (std::size_t i = 0; i < want.size(); ++i) {
      CHECK(got[i].hash_ids == want[i].hash_ids);
      CHECK(got[i].session_id == want[i].session_id);
      CHECK(got[i].priority == want[i].priority);
      CHECK(got[i].cancel_time == want[i].cancel_time);
      CHECK(got[i].prompt_tokens == want[i].prompt_tokens);
    }
  }
}

TEST_CASE("convert to Mooncake keeps times, lengths and hash ids", "[traces][convert]") {
  TraceReadOptions read;
  read.format = TraceFormat::mooncake;
  read.hash_block_size = 16;  // Mooncake readers assume 512
  std::string lost;
  const auto got = round_trip(TraceFormat::mooncake, read, &lost);
  check_core(got);
  CHECK(got[0].hash_ids == std::vector<std::uint64_t>{7, 8});
  CHECK(got[0].hash_block_size == 16);
  CHECK(got[1].session_id == -1);
  CHECK(got[1].priority == 0);
  CHECK(got[1].cancel_time == kNoTime);
  CHECK(got[2].prompt_tokens.empty());
  CHECK(lost == "hash block sizes other than 512 (read back with --hash-block-size) (1 request), sessions (1 request), "
                "priorities (1 request), cancel times (1 request), prompt token ids (1 request)");
  std::string row;
  append_mooncake(row, sample_requests()[3]);
  CHECK(row == "{\"timestamp\":3703.70368,\"input_length\":43,\"output_length\":8,\"hash_ids\":[]}");
}

TEST_CASE("convert to Vidur and Azure keeps times to the ns and lengths", "[traces][convert]") {
  for (TraceFormat f : {TraceFormat::vidur, TraceFormat::azure}) {
    std::string lost;
    const auto got = round_trip(f, {}, &lost);
    check_core(got);
    CHECK(got[0].hash_ids.empty());
    CHECK_THAT(lost, Catch::StartsWith("hash ids (1 request), sessions"));
  }
  std::string row;
  append_azure(row, sample_requests()[1]);
  CHECK(row == "2024-01-01 00:00:01.234567891,41,6");
  row.clear();
  append_vidur(row, sample_requests()[1]);
  CHECK(row == "1.234567891,41,6");
}

TEST_CASE("CLI: convert --to, traces without times given a rate", "[traces][cli][convert]") {
  const char* bin = std::getenv("TWIN_BIN");
  if (!bin) TWIN_SKIP("TWIN_BIN is not set (run through ctest)");
  auto run = [&](const std::string& args) {
    const int status = std::system((std::string(bin) + " " + args + " >/dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  TempFile out(".txt"), back(".jsonl");
  for (const char* to : {"jsonl", "csv", "mooncake", "vidur", "azure"}) {
    INFO(to);
    REQUIRE(run("trace convert " + fixture("azure2024.csv.gz") + " " + out.path + " --force --to " + to) == 0);
    REQUIRE(run("trace convert " + out.path + " " + back.path + " --force") == 0);
    const auto got = read_all(back.path);
    const auto want = read_all(fixture("azure2024.csv"));
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i].arrival == want[i].arrival);
  }
  CHECK(run("trace convert " + fixture("azure.csv") + " " + out.path + " --force --to nope") == 2);
  CHECK(run("trace convert " + fixture("azure.csv") + " " + out.path + ".gz --force") == 2);
  CHECK(run("trace convert " + fixture("vidur_lengths.csv") + " " + back.path + " --force") == 1);
  REQUIRE(run("trace convert " + fixture("vidur_lengths.csv") + " " + back.path + " --force --rate 2 --arrivals gamma --cv 2 --arrival-seed 5") == 0);
  CHECK(read_all(back.path).size() == 3);
  CHECK(run("trace stats " + fixture("sharegpt.json") + " --rate 1") == 0);
  CHECK(run("trace stats " + fixture("azure.csv") + " --rate 1") == 2);
}
