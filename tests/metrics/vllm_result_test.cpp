// vllm_result.json: the keys `vllm bench serve --save-result` writes, with
// our figures under them (vllm/benchmarks/serve.py names them).
#include <catch2/catch.hpp>

#include "metrics/collector.hpp"
#include "metrics/vllm_result.hpp"
#include "tests/metrics/records_fixture.hpp"

namespace twin {

TEST_CASE("vllm_result.json carries vLLM's keys with the summary's figures") {
  MetricsCollector c;
  for (const auto& r : test::hand_requests()) c.add(r);
  SummaryContext context;
  context.slos = parse_slos("ttft_p90<=1s");
  const Summary s = c.summarize(context);
  const nlohmann::ordered_json j = vllm_result_json(s, {"twinserve-simulate", "tiny"});
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
  const nlohmann::ordered_json j = vllm_result_json(c.summarize({}), {"twinserve-run", "tiny"});
  CHECK(j["request_goodput"].is_null());
  CHECK(j["request_rate"].is_null());
}

}  // namespace twin
