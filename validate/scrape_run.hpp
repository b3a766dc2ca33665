#pragma once
// A run measured as scrapes of a server's Prometheus /metrics (vLLM's or
// SGLang's names; our serve sends vLLM's), for calibrate --measured and
// validate --measured: the latency histograms, token counters and gauges
// of one model, summed over the other labels (engines, DP ranks), as each
// scrape saw them. A scrape lists no requests: what the run measured is the
// growth of each histogram between scrapes, per interval. docs/calibrate.md
// ("From /metrics scrapes").
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "metrics/prom_text.hpp"

namespace twin {

// A histogram summed over its label sets: cumulative buckets, sum, count.
struct ScrapeHistogram {
  bool present = false;
  std::vector<double> bounds;      // ascending `le`, +Inf last
  std::vector<double> cumulative;  // observations at or below each bound
  double sum = 0, count = 0;
};

// `later - earlier` (the observations between two scrapes).
ScrapeHistogram histogram_delta(const ScrapeHistogram& later, const ScrapeHistogram& earlier);
// Adds `more`'s observations (same buckets) to `into`.
void histogram_add(ScrapeHistogram& into, const ScrapeHistogram& more);
// Prometheus' histogram_quantile: the bucket holding rank q * count, linear
// within it (the last finite bound for +Inf's); NaN without observations.
double histogram_quantile(const ScrapeHistogram& h, double q);

// One scrape's totals of the series the fit reads.
struct ScrapeTotals {
  std::string where;  // FILE:LINE where the scrape begins
  ScrapeHistogram ttft, e2e, tpot, itl, iteration_tokens;
  double prompt_tokens = 0, generation_tokens = 0, prefix_queries = 0, prefix_hits = 0, preemptions = 0;
  double running = 0, waiting = 0;
  bool has_prompt_tokens = false, has_generation_tokens = false, has_prefix = false;
};

struct ScrapeRun {
  std::string engine;      // "vllm" or "sglang": the names' prefix
  std::string model_name;  // the series' model_name label ("" when none has one)
  std::string model_where; // FILE:LINE of a sample carrying it
  std::vector<ScrapeTotals> scrapes;  // in time order
  // The scrapes bounding the fit's intervals (indexes into `scrapes`; the
  // first is 0): consecutive scrapes, merged until an interval holds at
  // least kMinScrapeRequests finished requests.
  std::vector<std::size_t> bounds;
  // TPOT: vLLM's per-request request_time_per_output_token ("request"),
  // else the per-token inter_token_latency ("token": a token-weighted mean).
  std::string tpot_basis;
  std::vector<std::string> warnings;

  std::size_t intervals() const { return bounds.empty() ? 0 : bounds.size() - 1; }
  // Finished requests (the E2E histogram's growth) from the first scrape on.
  double finished() const;
};

inline constexpr double kMinScrapeRequests = 10;

// Whether `path` is a scrape run: a file that opens like an exposition, or
// a folder holding such files and neither vllm_result.json nor requests.csv.
bool is_scrape_path(const std::filesystem::path& path);

// Reads a file of one or more scrapes, or a folder of them (files in name
// order: name them by time). Errors (twin::Error) name FILE:LINE: a scrape
// of neither engine, several models in one scrape, series missing, buckets
// that change, a counter that goes backwards (a restarted server), fewer
// than two scrapes, no request finished between them.
ScrapeRun read_scrape_run(const std::filesystem::path& path);

}  // namespace twin
