#include "metrics/backlog.hpp"

#include <algorithm>
#include <cstdio>

#include "metrics/percentile.hpp"

namespace twin {
namespace {

// Enough requests in each quarter for a median to mean something, a late
// median four times the early one, and at least a second more: a queue, not
// a slower mix of prompts.
constexpr std::uint64_t kMinPerQuarter = 8;
constexpr double kGrowth = 4.0;
constexpr double kMinExtraMs = 1000.0;

double median_ms(std::vector<double>& ms) {
  std::sort(ms.begin(), ms.end());
  return percentile_linear(ms, 50);
}

}  // namespace

BacklogTrend backlog_trend(std::vector<std::pair<Time, Time>> arrival_ttft, std::uint64_t num_requests,
                           Time first_arrival, Time last_arrival) {
  BacklogTrend t;
  if (first_arrival == kNoTime || last_arrival == kNoTime || last_arrival <= first_arrival) return t;
  const Time span = last_arrival - first_arrival;
  t.offered_rate = static_cast<double>(num_requests - 1) / to_seconds(span);
  std::vector<double> early, late;
  for (const auto& [arrival, ttft] : arrival_ttft) {
    if (arrival - first_arrival <= span / 4) early.push_back(static_cast<double>(ttft) / 1e6);
    if (last_arrival - arrival <= span / 4) late.push_back(static_cast<double>(ttft) / 1e6);
  }
  t.early = early.size();
  t.late = late.size();
  if (t.early < kMinPerQuarter || t.late < kMinPerQuarter) return t;
  t.early_ttft_p50_ms = median_ms(early);
  t.late_ttft_p50_ms = median_ms(late);
  t.falling_behind = t.late_ttft_p50_ms > kGrowth * t.early_ttft_p50_ms &&
                     t.late_ttft_p50_ms - t.early_ttft_p50_ms > kMinExtraMs;
  return t;
}

std::optional<std::string> backlog_warning(const BacklogTrend& t, double served_rate) {
  if (!t.falling_behind) return std::nullopt;
  char text[512];
  std::snprintf(text, sizeof text,
                "overloaded: requests arriving in the last quarter of the trace waited %.1f s (median) for their "
                "first token, those in the first quarter %.2f s; arrivals come at %.2f req/s and %.2f req/s were "
                "served, so the queue grew all along and the latencies measure it. Lower the rate, add replicas, "
                "or size the cluster with `twinserve plan`",
                t.late_ttft_p50_ms / 1e3, t.early_ttft_p50_ms / 1e3, t.offered_rate, served_rate);
  return std::string(text);
}

}  // namespace twin
