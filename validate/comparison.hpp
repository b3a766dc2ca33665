#pragma once
// Measured (the engine) against predicted (a simulation of the same
// requests): summary percentiles with % error, the per-request error
// distribution, and replay parity (the simulator fed the engine's own step
// times must reproduce every request's times exactly).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/records.hpp"
#include "metrics/summary.hpp"

namespace twin {

// (predicted - measured) / measured * 100; NaN when measured is 0 or either is NaN.
double error_pct(double measured, double predicted);

struct MetricComparison {
  std::string metric;  // ttft_ms, tpot_ms, itl_ms, e2el_ms, output_throughput
  std::string stat;    // p50, p90, p99; "value" for throughput
  double measured = 0, predicted = 0, error_pct = 0;
};

// TTFT, TPOT, ITL and E2EL at p50 / p90 / p99, then output_throughput.
std::vector<MetricComparison> compare_summaries(const Summary& measured, const Summary& predicted);

// The same against several measured runs of the same requests: each metric's
// measured value is the median over the runs (two runs: their mean; a run
// without the metric is left out), so one run slowed by the machine does not
// set the figure. One run: compare_summaries.
std::vector<MetricComparison> compare_to_runs(const std::vector<const Summary*>& measured_runs,
                                              const Summary& predicted);

// Per-request signed % error of one metric over the requests finished in
// both runs (matched by id).
struct RequestErrorStats {
  std::string metric;  // ttft, tpot, e2el
  std::int64_t count = 0;
  double p10 = 0, p50 = 0, p90 = 0;  // signed %, NaN without data
  double mean_abs = 0;
};
std::vector<RequestErrorStats> request_errors(const std::vector<RequestRecord>& measured,
                                              const std::vector<RequestRecord>& predicted);

struct ParityResult {
  std::int64_t requests = 0;     // measured records
  std::int64_t mismatched = 0;   // records that differ in anything (or are missing)
  Time max_abs_ns = 0;           // largest difference over arrival, first token, finish and every ITL gap
  std::string first_mismatch;    // the first difference found, for the report; empty when none
  bool exact() const { return mismatched == 0 && max_abs_ns == 0; }
};
ParityResult compare_parity(const std::vector<RequestRecord>& measured, const std::vector<RequestRecord>& replayed);

}  // namespace twin
