#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "base/error.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/step_csv.hpp"
#include "records_fixture.hpp"
#include "temp_dir.hpp"

using namespace twin;
using Catch::Matchers::Contains;

namespace {
void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}
}  // namespace

TEST_CASE("requests.csv rows show exact times and derived latencies") {
  std::ostringstream out;
  RequestCsvWriter writer(out);
  const auto records = test::hand_requests();
  for (const auto& r : records) writer.write(r);
  std::istringstream lines(out.str());
  std::string header, row0, row1, row2, row3;
  std::getline(lines, header);
  std::getline(lines, row0);
  std::getline(lines, row1);
  std::getline(lines, row2);
  std::getline(lines, row3);
  CHECK(header ==
        "id,replica,outcome,arrival_s,first_token_s,finish_s,prompt_tokens,output_tokens,cached_prompt_tokens,"
        "preemptions,ttft_ms,tpot_ms,e2el_ms,reason,scheduled_s");
  CHECK(row0 == "0,0,finished,0.000000000,0.100000000,1.100000000,100,11,50,0,100.000000,100.000000,1100.000000,,0.050000000");
  CHECK(row2 == "2,0,finished,2.000000000,2.050000000,2.050000000,300,1,100,0,50.000000,,50.000000,,");
  CHECK(row3 == "3,1,rejected,3.000000000,,3.000000000,5000,0,0,0,,,,\"prompt too long, \"\"4096\"\" > max\",");
}

TEST_CASE("requests.csv round-trips every field but the ITL gaps") {
  test::TempDir dir;
  const auto path = dir.path() / "requests.csv";
  const auto records = test::hand_requests();
  {
    std::ofstream out(path, std::ios::binary);
    RequestCsvWriter writer(out);
    for (const auto& r : records) writer.write(r);
  }
  const auto back = read_request_records(path);
  REQUIRE(back.size() == records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& a = records[i];
    const auto& b = back[i];
    CHECK(a.id == b.id);
    CHECK(a.replica == b.replica);
    CHECK(a.outcome == b.outcome);
    CHECK(a.reason == b.reason);
    CHECK(a.arrival == b.arrival);
    CHECK(a.first_token == b.first_token);
    CHECK(a.first_scheduled == b.first_scheduled);
    CHECK(a.finish == b.finish);
    CHECK(a.prompt_tokens == b.prompt_tokens);
    CHECK(a.output_tokens == b.output_tokens);
    CHECK(a.cached_prompt_tokens == b.cached_prompt_tokens);
    CHECK(a.preemptions == b.preemptions);
    CHECK(b.itl.empty());
  }
}

TEST_CASE("steps.csv round-trips exactly, large times included") {
  test::TempDir dir;
  const auto path = dir.path() / "steps.csv";
  const auto steps = test::hand_steps();
  std::ostringstream text;
  {
    StepCsvWriter writer(text);
    for (const auto& s : steps) writer.write(s);
  }
  CHECK(text.str() ==
        "step_id,replica,start_s,duration_ms,batch_size,num_prefill_seqs,num_decode_seqs,new_tokens,context_tokens,"
        "kv_blocks_used,preempted,waiting\n"
        "0,0,0.000000000,12.345678,2,1,1,101,7,10,0,3\n"
        "1,1,123456.789012345,0.000001,4,0,4,4,4000,30,1,0\n");
  write_file(path, text.str());
  const auto back = read_step_records(path);
  REQUIRE(back.size() == steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CHECK(back[i].step_id == steps[i].step_id);
    CHECK(back[i].replica == steps[i].replica);
    CHECK(back[i].start == steps[i].start);
    CHECK(back[i].duration == steps[i].duration);
    CHECK(back[i].batch_size == steps[i].batch_size);
    CHECK(back[i].num_prefill_seqs == steps[i].num_prefill_seqs);
    CHECK(back[i].num_decode_seqs == steps[i].num_decode_seqs);
    CHECK(back[i].new_tokens == steps[i].new_tokens);
    CHECK(back[i].context_tokens == steps[i].context_tokens);
    CHECK(back[i].kv_blocks_used == steps[i].kv_blocks_used);
    CHECK(back[i].preempted == steps[i].preempted);
    CHECK(back[i].waiting == steps[i].waiting);
  }
}

TEST_CASE("steps.csv carries the speculative columns only when asked, and reads them back") {
  test::TempDir dir;
  const auto path = dir.path() / "steps.csv";
  auto steps = test::hand_steps();
  steps[1].proposed_tokens = 7;
  steps[1].accepted_tokens = 4;
  steps[1].lookahead = {3, 3, 1};
  steps[1].accepted = {3, 0, 1};
  std::ostringstream text;
  {
    StepCsvWriter writer(text, true);
    for (const auto& s : steps) writer.write(s);
  }
  CHECK(text.str() ==
        "step_id,replica,start_s,duration_ms,batch_size,num_prefill_seqs,num_decode_seqs,new_tokens,context_tokens,"
        "kv_blocks_used,preempted,waiting,proposed_tokens,accepted_tokens,lookahead_accepted\n"
        "0,0,0.000000000,12.345678,2,1,1,101,7,10,0,3,0,0,\n"
        "1,1,123456.789012345,0.000001,4,0,4,4,4000,30,1,0,7,4,3:3 3:0 1:1\n");
  write_file(path, text.str());
  const auto back = read_step_records(path);
  REQUIRE(back.size() == 2);
  CHECK(back[0].lookahead.empty());
  CHECK(back[1].proposed_tokens == 7);
  CHECK(back[1].accepted_tokens == 4);
  CHECK(back[1].lookahead == steps[1].lookahead);
  CHECK(back[1].accepted == steps[1].accepted);
  std::string bad = text.str();
  bad.replace(bad.find("3:0"), 3, "3:9");
  write_file(path, bad);
  CHECK_THROWS_WITH(read_step_records(path), Contains("lookahead_accepted"));
}

TEST_CASE("readers accept columns in any order and CRLF line ends") {
  test::TempDir dir;
  const auto path = dir.path() / "steps.csv";
  write_file(path,
             "replica,step_id,start_s,duration_ms,batch_size,num_prefill_seqs,num_decode_seqs,new_tokens,"
             "context_tokens,kv_blocks_used,preempted,waiting\r\n"
             "3,7,1.5,2,1,1,0,10,0,1,0,0\r\n\r\n");
  const auto back = read_step_records(path);
  REQUIRE(back.size() == 1);
  CHECK(back[0].replica == 3);
  CHECK(back[0].step_id == 7);
  CHECK(back[0].start == 1'500'000'000);
  CHECK(back[0].duration == 2'000'000);
}

TEST_CASE("reader errors name file, line and column") {
  test::TempDir dir;
  const auto path = dir.path() / "steps.csv";
  const std::string header =
      "step_id,replica,start_s,duration_ms,batch_size,num_prefill_seqs,num_decode_seqs,new_tokens,context_tokens,"
      "kv_blocks_used,preempted,waiting\n";
  write_file(path, header + "0,0,0.0,1.0,1,1,0,1,0,1,0,0\n1,0,0.5,abc,1,1,0,1,0,1,0,0\n");
  CHECK_THROWS_WITH(read_step_records(path), Contains("steps.csv:3") && Contains("duration_ms") && Contains("\"abc\""));

  write_file(path, header + "0,0,0.0,1.0,1,1,0,1,0,1,0\n");
  CHECK_THROWS_WITH(read_step_records(path), Contains("steps.csv:2") && Contains("11 fields; expected 12"));

  write_file(path, header + "0,0,0.0000000001,1.0,1,1,0,1,0,1,0,0\n");
  CHECK_THROWS_WITH(read_step_records(path), Contains("start_s") && Contains("at most 9 decimals"));

  write_file(path, "step_id,replica,start,duration_ms\n");
  CHECK_THROWS_WITH(read_step_records(path), Contains("steps.csv:1") && Contains("unknown column \"start\""));

  write_file(path, "");
  CHECK_THROWS_WITH(read_step_records(path), Contains("steps.csv:1") && Contains("header"));

  CHECK_THROWS_WITH(read_step_records(dir.path() / "missing.csv"), Contains("missing.csv") && Contains("cannot open"));

  const auto requests = dir.path() / "requests.csv";
  write_file(requests,
             "id,replica,outcome,arrival_s,first_token_s,finish_s,prompt_tokens,output_tokens,cached_prompt_tokens,"
             "preemptions,ttft_ms,tpot_ms,e2el_ms,reason\n"
             "0,0,done,0.0,0.1,0.2,1,1,0,0,,,,\n");
  CHECK_THROWS_WITH(read_request_records(requests),
                    Contains("requests.csv:2") && Contains("outcome") && Contains("finished, aborted or rejected"));
  CHECK_THROWS_AS(read_request_records(requests), Error);
}
