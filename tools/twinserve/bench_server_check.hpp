#pragma once
// Whether the bench's TTFT can be trusted: the client's median TTFT set
// against the server's own account of the same requests. twinserve serve
// sends each request's record (arrival and first token on its clock) in the
// stream's last chunk, so the two medians are of the same requests; another
// server is compared through the TTFT histogram of its /metrics (vLLM's
// vllm:time_to_first_token_seconds, scraped before and after the run), to
// the resolution of its buckets; a server with neither is not compared.
// What the client adds on loopback is a few tenths of a millisecond; past
// the tolerance something is in the way (Nagle's algorithm, a proxy, an
// overloaded client machine) and the bench says so. docs/bench.md.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/types.hpp"
#include "tools/twinserve/bench_replay.hpp"

namespace twin::cli {

// The medians may differ by this much before the bench warns.
inline constexpr double kServerTtftToleranceMs = 3.0;

// The TTFT histogram vLLM's /metrics (and twinserve serve's) exposes.
inline constexpr const char* kTtftHistogram = "vllm:time_to_first_token_seconds";

// A Prometheus histogram's cumulative buckets, summed over its label sets
// (a server with several models or engines lists one set each).
struct PromHistogram {
  std::vector<double> bounds;         // ascending `le`, +Inf last
  std::vector<double> cumulative;     // requests at or below each bound
};

// `name`'s buckets in Prometheus text exposition; nullopt when the text has
// none of them (a server without the metric).
std::optional<PromHistogram> parse_prom_histogram(const std::string& text, const std::string& name);

struct ServerTtftCheck {
  std::string source;  // "server records", "/metrics histogram", or "" (not compared)
  std::string note;    // why not compared, or what to know of the comparison
  std::int64_t requests = 0;  // client-side requests compared
  double client_p50_ms = 0, server_p50_ms = 0, difference_ms = 0;
  // Histogram only: the bucket holding the server's median (ms).
  double server_bucket_low_ms = 0, server_bucket_high_ms = 0;
  bool agrees = true;
};

// The completed requests' pairs: the server's records of the same requests
// when every one carries it, else the histogram's growth over the run
// (`before` and `after` the /metrics text; empty when not read).
ServerTtftCheck check_server_ttft(const std::vector<TtftPair>& ttfts, const std::string& metrics_before,
                                  const std::string& metrics_after);

// summary.json's "server_ttft" object.
nlohmann::ordered_json server_ttft_json(const ServerTtftCheck& check);
// The summary's warning when the medians disagree; "" when they agree.
std::string server_ttft_warning(const ServerTtftCheck& check);

}  // namespace twin::cli
