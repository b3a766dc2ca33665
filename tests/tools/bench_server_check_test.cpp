// The bench's check of its TTFT against the server's (tools/twinserve/
// bench_server_check.hpp): Prometheus histograms read from /metrics text,
// medians of the same requests against the server's records, the bucket
// of the histogram's median, and what is said when nothing can be compared.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "tools/twinserve/bench_server_check.hpp"

using namespace twin;
using namespace twin::cli;

namespace {

constexpr Time kMs = 1'000'000;

std::string histogram_text(const std::vector<std::pair<std::string, int>>& buckets, const std::string& labels) {
  std::string text = "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n"
                     "# TYPE vllm:time_to_first_token_seconds histogram\n";
  for (const auto& [le, n] : buckets) {
    text += "vllm:time_to_first_token_seconds_bucket{" + labels + "le=\"" + le + "\"} " + std::to_string(n) + "\n";
  }
  text += "vllm:time_to_first_token_seconds_count{" + labels + "} 0\n";
  return text;
}

}  // namespace

TEST_CASE("Prometheus histogram: buckets summed over label sets, other metrics ignored") {
  const std::string text =
      histogram_text({{"0.01", 2}, {"0.02", 5}, {"+Inf", 6}}, "engine=\"0\",") +
      histogram_text({{"0.01", 1}, {"0.02", 1}, {"+Inf", 3}}, "engine=\"1\",") +
      "vllm:time_to_first_token_seconds_bucket_x{le=\"0.01\"} 99\n"  // another name with the same start
      "vllm:e2e_request_latency_seconds_bucket{le=\"0.01\"} 42\n";
  const auto h = parse_prom_histogram(text, kTtftHistogram);
  REQUIRE(h);
  REQUIRE(h->bounds.size() == 3);
  CHECK(h->bounds[0] == 0.01);
  CHECK(h->bounds[1] == 0.02);
  CHECK(std::isinf(h->bounds[2]));
  CHECK(h->cumulative == std::vector<double>{3, 6, 9});
  CHECK_FALSE(parse_prom_histogram("vllm:num_requests_running 3\n", kTtftHistogram));
  // No +Inf bucket: not a histogram to read a median from.
  CHECK_FALSE(parse_prom_histogram(histogram_text({{"0.01", 2}}, ""), kTtftHistogram));
}

TEST_CASE("server records: the medians of the same requests, within the tolerance or not") {
  std::vector<TtftPair> pairs;
  for (int i = 0; i < 5; ++i) pairs.push_back({(10 + i) * kMs + kMs / 2, (10 + i) * kMs});
  ServerTtftCheck c = check_server_ttft(pairs, "", "");
  CHECK(c.source == "server records");
  CHECK(c.requests == 5);
  CHECK(c.client_p50_ms == Approx(12.5));
  CHECK(c.server_p50_ms == Approx(12.0));
  CHECK(c.difference_ms == Approx(0.5));
  CHECK(c.agrees);
  CHECK(server_ttft_warning(c).empty());
  const auto j = server_ttft_json(c);
  CHECK(j["source"] == "server records");
  CHECK(j["tolerance_ms"] == kServerTtftToleranceMs);
  CHECK(j["agrees"] == true);

  // Nagle's 40 ms on every request: a warning naming both medians.
  for (TtftPair& p : pairs) p.client += 40 * kMs;
  c = check_server_ttft(pairs, "", "");
  CHECK_FALSE(c.agrees);
  CHECK(c.difference_ms == Approx(40.5));
  CHECK(server_ttft_warning(c).find("52.500 ms disagrees with the server's own record of the same requests (12.000 ms)") !=
        std::string::npos);
  // A first chunk before the first token (a role delta at arrival).
  for (TtftPair& p : pairs) p.client = kMs / 2;
  c = check_server_ttft(pairs, "", "");
  CHECK_FALSE(c.agrees);
  CHECK(server_ttft_warning(c).find("a chunk before the first token") != std::string::npos);

  // Requests without the record are left out, and the note says how many.
  pairs.push_back({1000 * kMs, std::nullopt});
  c = check_server_ttft(pairs, "", "");
  CHECK(c.requests == 5);
  CHECK(c.note.find("1 of 6 completed requests came without it") != std::string::npos);
}

TEST_CASE("/metrics histogram: the bucket of the run's median, and nothing to compare") {
  std::vector<TtftPair> pairs;
  for (int i = 0; i < 4; ++i) pairs.push_back({(22 + i) * kMs, std::nullopt});  // client median 23.5 ms
  // Before the run: 10 requests of earlier traffic; the run adds 4, in (0.02, 0.04].
  const std::string before = histogram_text({{"0.01", 10}, {"0.02", 10}, {"0.04", 10}, {"+Inf", 10}}, "");
  const std::string after = histogram_text({{"0.01", 10}, {"0.02", 10}, {"0.04", 14}, {"+Inf", 14}}, "");
  ServerTtftCheck c = check_server_ttft(pairs, before, after);
  CHECK(c.source == "/metrics histogram");
  CHECK(c.server_bucket_low_ms == Approx(20));
  CHECK(c.server_bucket_high_ms == Approx(40));
  CHECK(c.server_p50_ms == Approx(30));  // half way into the bucket, as histogram_quantile
  CHECK(c.agrees);
  // The client's median past the bucket and the tolerance.
  for (TtftPair& p : pairs) p.client += 30 * kMs;
  c = check_server_ttft(pairs, before, after);
  CHECK_FALSE(c.agrees);
  CHECK(server_ttft_warning(c).find("in its bucket (20, 40] ms") != std::string::npos);
  // Other traffic in the histogram is noted.
  const std::string more = histogram_text({{"0.01", 11}, {"0.02", 11}, {"0.04", 15}, {"+Inf", 15}}, "");
  CHECK(check_server_ttft(pairs, before, more).note.find("it counted 5 requests, the bench completed 4") !=
        std::string::npos);

  // Nothing to compare: no metric, no growth, no completed request.
  c = check_server_ttft(pairs, "", "");
  CHECK(c.source.empty());
  CHECK(c.note.find("no record of its own") != std::string::npos);
  CHECK(server_ttft_json(c)["agrees"].is_null());
  CHECK(server_ttft_warning(c).empty());
  CHECK(check_server_ttft(pairs, after, after).note.find("did not grow") != std::string::npos);
  CHECK(check_server_ttft({}, before, after).note.find("no request completed") != std::string::npos);
}
