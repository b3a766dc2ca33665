#pragma once
// Streams records in, summarises at the end. Records may come in any order;
// the summary depends only on the multiset of records.
//
// Memory: up to CollectorOptions::exact_requests completed requests, a few
// 8-byte values each (TTFT, TPOT, E2E, max ITL, arrival), so TTFT, TPOT and
// E2EL percentiles are exact; past it those values are folded into
// log-bucketed histograms (metrics/log_histogram.hpp, every percentile
// within 0.39%) and memory stays flat however many requests come. ITL is
// always a histogram: never every inter-token gap. docs/outputs.md,
// "Percentiles".
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engine/core/records.hpp"
#include "metrics/log_histogram.hpp"
#include "metrics/peak_tally.hpp"
#include "metrics/slo.hpp"
#include "metrics/summary.hpp"

namespace twin {

struct CollectorOptions {
  // Completed requests kept one by one (exact percentiles); the next one
  // switches to histograms. 0: histograms from the first request;
  // kAlwaysExact: never.
  static constexpr std::uint64_t kDefaultExactRequests = std::uint64_t{1} << 22;  // 4,194,304
  static constexpr std::uint64_t kAlwaysExact = ~std::uint64_t{0};
  std::uint64_t exact_requests = kDefaultExactRequests;
  // The run's SLOs. Past the limit goodput and each SLO's share are counted
  // as records arrive, so summarize() must then get these same SLOs
  // (twin::Error otherwise); below it any SLOs may be asked for.
  std::vector<Slo> slos;
};

class MetricsCollector {
 public:
  MetricsCollector() = default;
  explicit MetricsCollector(CollectorOptions options);
  // Records with impossible times (finish before arrival, negative gaps)
  // throw twin::Error naming the request or step.
  void add(const RequestRecord& record);
  void add(const StepRecord& record);
  // Steps counted elsewhere (a loop's replicas, RecordSink::on_step_tally).
  void add(const StepTally& tally);
  Summary summarize(const SummaryContext& context) const;
  // True once the per-request values went into histograms.
  bool streaming() const { return streaming_; }

 private:
  // summarize()'s sections; the sorted per-request latencies in ms
  // (empty when streaming: the histograms answer).
  struct SortedLatencies {
    std::vector<double> ttft, tpot, e2el;
  };
  void summarize_latencies(const SortedLatencies& sorted, Summary& s) const;
  void summarize_goodput(const SummaryContext& context, const SortedLatencies& sorted, Summary& s) const;
  double slo_percentile_ms(const Slo& slo, const SortedLatencies& sorted) const;
  void summarize_transfers(TransferSummary& t) const;
  void summarize_replicas(const SummaryContext& context, Summary& s) const;
  void summarize_steps(const SummaryContext& context, Summary& s) const;
  void summarize_backlog(Summary& s) const;
  void switch_to_histograms();
  void tally_replica_load(const RequestRecord& record);
  void stream_completed(Time arrival, Time ttft, Time e2el, double tpot_ns, Time max_itl);
  void sample_backlog(Time arrival, Time ttft);

  struct ReplicaTally {
    std::uint64_t requests = 0, tokens = 0;
  };
  std::uint64_t num_requests_ = 0, completed_ = 0, rejected_ = 0, aborted_ = 0;
  // Per completed request, in ns (TPOT in ns as a double; -1 when undefined).
  std::vector<Time> ttft_ns_, e2el_ns_, max_itl_ns_, arrival_ns_;
  std::vector<double> tpot_ns_;
  LogHistogram itl_ns_;
  Time first_arrival_ = kNoTime, last_arrival_ = kNoTime, last_finish_ = kNoTime;
  std::uint64_t input_tokens_ = 0, output_tokens_ = 0, cached_tokens_ = 0;
  std::uint64_t preemptions_ = 0;
  std::uint64_t handed_off_ = 0, transfer_bytes_ = 0;
  std::vector<Time> kv_wait_ns_, kv_transfer_ns_;  // per transfer (exact mode)
  CollectorOptions options_;
  bool streaming_ = false;
  // Streaming mode: the distributions (TPOT in integer picoseconds) and,
  // per SLO, the completed requests meeting its threshold, and those
  // meeting all of them.
  LogHistogram ttft_h_, e2el_h_, tpot_ps_h_, kv_wait_h_, kv_transfer_h_;
  std::vector<std::uint64_t> slo_met_;
  std::uint64_t good_ = 0;
  // Streaming mode: (arrival, TTFT) of the completed requests whose pair's
  // hash has its top `backlog_level_` bits zero (a sample the record order
  // cannot change), halved when it outgrows kBacklogSample; the backlog
  // warning's quarters are judged on it.
  static constexpr std::size_t kBacklogSample = std::size_t{1} << 18;
  std::vector<std::pair<Time, Time>> backlog_sample_;
  int backlog_level_ = 0;

  std::map<std::int32_t, ReplicaTally> replicas_;
  StepTally steps_;
  PeakTally peaks_;  // vLLM's peak tokens per second and concurrency
};

}  // namespace twin
