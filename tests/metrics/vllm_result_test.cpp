// vllm_result.json: the keys `vllm bench serve --save-result` writes, with
// our figures under them (vllm/benchmarks/serve.py names them).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "metrics/collector.hpp"
#include "metrics/vllm_detailed.hpp"
#include "metrics/vllm_result.hpp"
#include "tests/metrics/records_fixture.hpp"
#include "tests/metrics/temp_dir.hpp"

namespace twin {

TEST_CASE("vllm_result.json carries vLLM's keys with the summary's figures") {
  MetricsCollector c;
  for (const auto& r : test::hand_requests()) c.add(r);
  SummaryContext context;
  context.slos = parse_slos("ttft_p90<=1s");
  const Summary s = c.summarize(context);
  const nlohmann::ordered_json j = vllm_result_json(s, {"twinserve-simulate", "tiny", ""});
  for (const char* key : {"endpoint_type", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate", "burstiness",
                          "max_concurrency", "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
                          "request_throughput", "request_goodput", "output_throughput", "total_token_throughput"}) {
    INFO(key);
    CHECK(j.contains(key));
  }
  for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
    for (const char* stat : {"mean", "median", "std", "p90", "p99"}) {
      const std::string key = std::string(stat) + "_" + metric + "_ms";
      INFO(key);
      CHECK(j[key].is_number());
    }
  }
  CHECK(j["num_prompts"] == 5);
  CHECK(j["completed"] == 3);
  CHECK(j["failed"] == 2);  // one rejected, one aborted
  CHECK(j["median_ttft_ms"].get<double>() == Approx(100));
  CHECK(j["mean_e2el_ms"].get<double>() == Approx((1100.0 + 1500 + 50) / 3));
  CHECK(j["request_rate"].get<double>() == Approx(4 / 3.5));  // five arrivals over 3.5 s
  CHECK(j["request_goodput"].is_number());
  CHECK(j["model_id"] == "tiny");
}

TEST_CASE("vllm_result.json: no goodput without SLOs, no rate for a burst") {
  MetricsCollector c;
  RequestRecord r;
  r.id = 0;
  r.arrival = 0;
  r.first_token = 10;
  r.finish = 20;
  r.prompt_tokens = 4;
  r.output_tokens = 2;
  r.itl = {10};
  c.add(r);
  r.id = 1;
  c.add(r);
  const nlohmann::ordered_json j = vllm_result_json(c.summarize({}), {"twinserve-run", "tiny", ""});
  CHECK(j["request_goodput"].is_null());
  CHECK(j["request_rate"].is_null());
}

namespace {

RequestRecord finished(std::int64_t id, Time arrival, Time first, std::vector<Time> itl) {
  RequestRecord r;
  r.id = id;
  r.arrival = arrival;
  r.first_token = first;
  r.itl = std::move(itl);
  r.finish = first;
  for (const Time gap : r.itl) r.finish += gap;
  r.prompt_tokens = 8;
  r.output_tokens = static_cast<std::int32_t>(r.itl.size()) + 1;
  return r;
}

}  // namespace

TEST_CASE("vllm_result.json: date, backend and vLLM's peak tokens per second and concurrency") {
  constexpr Time ms = kNsPerMs;
  std::vector<RequestRecord> records = {
      // Tokens at 0.5, 0.7, 0.9 (second 0) and 1.1 s (second 1); active in seconds 0 and 1.
      finished(0, 0, 500 * ms, {200 * ms, 200 * ms, 200 * ms}),
      // Tokens at 0.95 and 0.96 s: second 0 holds 5 tokens; active in second 0 only.
      finished(1, 800 * ms, 950 * ms, {10 * ms}),
      // One token at 3.0 s; active in seconds 2 and 3.
      finished(2, 2500 * ms, 3000 * ms, {}),
  };
  RequestRecord aborted = finished(3, 0, 100 * ms, {1, 1, 1, 1, 1, 1, 1, 1});
  aborted.outcome = Outcome::aborted;  // vLLM counts successful requests only
  records.push_back(aborted);
  MetricsCollector forward, backward;
  for (const auto& r : records) forward.add(r);
  for (auto it = records.rbegin(); it != records.rend(); ++it) backward.add(*it);
  const Summary s = forward.summarize({});
  CHECK(s.max_output_tokens_per_s == 5);
  CHECK(s.max_concurrent_requests == 2);
  const nlohmann::ordered_json j = vllm_result_json(s, {"twinserve-run", "tiny", "20260101-120000"});
  CHECK(j["max_output_tokens_per_s"] == 5);
  CHECK(j["max_concurrent_requests"] == 2);
  CHECK(j["date"] == "20260101-120000");
  CHECK(j["backend"] == "twinserve");
  CHECK(j == vllm_result_json(backward.summarize({}), {"twinserve-run", "tiny", "20260101-120000"}));
  // Unset, the date is now in vLLM's form, or SOURCE_DATE_EPOCH's instant.
  CHECK(vllm_result_date().size() == 15);
  ::setenv("SOURCE_DATE_EPOCH", "86399", 1);
  CHECK(vllm_result_date() == "19700101-235959");
  CHECK(vllm_result_json(s, {"twinserve-run", "tiny", ""})["date"] == "19700101-235959");
  ::unsetenv("SOURCE_DATE_EPOCH");
}

TEST_CASE("vllm_result.json's per-request lists from records read back as vLLM's") {
  std::vector<VllmRequestEntry> entries;
  for (const RequestRecord& r : test::hand_requests()) entries.push_back(vllm_request_entry(r));
  REQUIRE(entries.size() == 5);
  CHECK(entries[0].input_len == 100);
  CHECK(entries[0].output_len == 11);
  CHECK(entries[0].ttft_s == Approx(0.1));
  CHECK(entries[0].itl_s.size() == 10);
  CHECK(*entries[0].latency_s == Approx(1.1));
  CHECK(entries[0].error.empty());
  CHECK(entries[3].output_len == 0);  // rejected: vLLM lists a failure with no output
  CHECK(entries[3].error == "prompt too long, \"4096\" > max");
  CHECK(entries[4].error == "cancelled");
  nlohmann::ordered_json j = vllm_result_json(MetricsCollector().summarize({}), {"twinserve-simulate", "tiny", ""});
  add_vllm_detailed(j, entries);
  test::TempDir dir;
  const auto path = dir.path() / "vllm_result.json";
  std::ofstream(path) << j.dump(2);
  const VllmDetailedResult back = read_vllm_detailed(path);
  REQUIRE(back.requests.size() == 5);
  CHECK(back.requests[1].input_len == 200);
  CHECK(back.requests[1].itl_s.size() == 2);
  CHECK(back.requests[1].ttft_s == Approx(0.5));
  CHECK(back.has_start_times);
  CHECK(*back.requests[2].start_time_s == Approx(2.0));
}

}  // namespace twin
