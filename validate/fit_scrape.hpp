#pragma once
// calibrate --measured on a run of /metrics scrapes (validate/scrape_run.hpp).
// A scrape lists no requests, so the simulator replays the trace the
// clients played (--trace, at its timestamps), and per interval between
// scrapes the fit compares the mean each histogram grew by (sum / count)
// with the mean over the simulated requests the same histogram would have
// counted then. Intervals are matched by count, not by clock: the k-th to
// n-th requests the server finished are the k-th to n-th the simulation
// finished (first tokens, for TTFT), so no offset between the scraper's
// clock and the trace's is needed. docs/calibrate.md ("From /metrics
// scrapes").
#include <string>
#include <vector>

#include "validate/fit_replay.hpp"
#include "validate/measured_fit.hpp"

namespace twin {

// A scrape RUN with the trace its clients played. UsageError without a
// trace (the message gives what the scrapes counted, for `trace generate`),
// with more finished requests than the trace has, or with prompt tokens
// that differ from the trace's by more than 10% (another tokenizer or
// trace); warnings for fewer finished requests than the trace's, outputs
// the server cut short, few requests per interval.
FitRun load_scrape_fit_run(const std::string& path, const std::string& trace, const TraceReadOptions& read,
                           std::int64_t max_requests);

// The scored intervals' residual slots of scrape run `k`.
void add_scrape_slots(std::size_t k, const FitRun& run, std::vector<ResidualSlot>& slots);

// The predicted mean (ms) of a ranked slot; NaN when the simulation
// finished none of its ranks. `missing` gets how many of the slot's ranks
// the simulation did not reach.
double ranked_slot_mean(const ResidualSlot& slot, const std::vector<RequestRecord>& predicted, std::int64_t& missing);

// The scored intervals (or the others, `complement`) measured against the
// replay: means from the histograms' sums, p50 and p90 from their buckets
// (the prediction put in the same buckets, so both have their resolution).
RunScore score_scrape_run(const FitRun& run, const std::vector<RequestRecord>& predicted, bool complement);

// Marks the intervals ending by the middle scrape (`first_half`) or the
// others; UsageError with fewer than two intervals.
void score_scrape_half(FitRun& run, bool first_half);

}  // namespace twin
