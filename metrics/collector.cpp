#include "metrics/collector.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "base/error.hpp"
#include "metrics/backlog.hpp"
#include "metrics/percentile.hpp"

namespace twin {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

[[noreturn]] void bad_request(const RequestRecord& r, const std::string& what) {
  throw Error("request record " + std::to_string(r.id) + ": " + what);
}

LatencyStats stats_of_sorted(const std::vector<double>& sorted_ms) {
  LatencyStats stats;
  stats.count = sorted_ms.size();
  if (sorted_ms.empty()) {
    stats.mean = stats.std = stats.p50 = stats.p90 = stats.p99 = stats.max = kNaN;
    return stats;
  }
  long double sum = 0;
  for (const double v : sorted_ms) sum += v;  // ascending: same bytes whatever the record order
  stats.mean = static_cast<double>(sum / static_cast<long double>(sorted_ms.size()));
  long double squares = 0;
  for (const double v : sorted_ms) squares += (v - stats.mean) * (v - stats.mean);
  stats.std = std::sqrt(static_cast<double>(squares / static_cast<long double>(sorted_ms.size())));
  stats.p50 = percentile_linear(sorted_ms, 50);
  stats.p90 = percentile_linear(sorted_ms, 90);
  stats.p99 = percentile_linear(sorted_ms, 99);
  stats.max = sorted_ms.back();
  return stats;
}

template <typename T>
std::vector<double> sorted_ms(const std::vector<T>& ns_values) {
  std::vector<double> ms;
  ms.reserve(ns_values.size());
  for (const T v : ns_values) {
    if (v >= 0) ms.push_back(static_cast<double>(v) / 1e6);  // negative: undefined for this request
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

LatencyStats stats_of_histogram(const LogHistogram& h) {
  LatencyStats stats;
  stats.count = h.count();
  if (h.count() == 0) {
    stats.mean = stats.std = stats.p50 = stats.p90 = stats.p99 = stats.max = kNaN;
    return stats;
  }
  stats.mean = h.mean() / 1e6;
  stats.std = h.stddev() / 1e6;
  stats.p50 = h.percentile(50) / 1e6;
  stats.p90 = h.percentile(90) / 1e6;
  stats.p99 = h.percentile(99) / 1e6;
  stats.max = static_cast<double>(h.max()) / 1e6;
  return stats;
}

Spread spread_of(const std::vector<double>& values) {
  Spread s;
  if (values.empty()) return s;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  long double sum = 0;
  for (const double v : values) sum += v;
  const long double mean = sum / static_cast<long double>(values.size());
  long double squares = 0;
  for (const double v : values) squares += (v - mean) * (v - mean);
  s.mean = static_cast<double>(mean);
  s.cv = mean > 0 ? static_cast<double>(std::sqrt(squares / static_cast<long double>(values.size())) / mean) : 0.0;
  return s;
}

double rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0.0; }

// A histogram in `unit_per_ms` units per millisecond, as LatencyStats.
LatencyStats stats_of_histogram(const LogHistogram& h, double unit_per_ms) {
  LatencyStats stats = stats_of_histogram(h);
  if (h.count() == 0) return stats;
  const double scale = 1e6 / unit_per_ms;  // stats_of_histogram read nanoseconds
  stats.mean *= scale;
  stats.std *= scale;
  stats.p50 *= scale;
  stats.p90 *= scale;
  stats.p99 *= scale;
  stats.max *= scale;
  return stats;
}

// TPOT (a fraction of nanoseconds) as whole picoseconds in its histogram.
std::int64_t tpot_ps(double tpot_ns) { return static_cast<std::int64_t>(std::llround(tpot_ns * 1000.0)); }

// splitmix64's finaliser: a well-mixed hash of a record's values.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool in_sample(Time arrival, Time ttft, int level) {
  if (level == 0) return true;
  const std::uint64_t h = mix(static_cast<std::uint64_t>(arrival) ^ mix(static_cast<std::uint64_t>(ttft)));
  return (h >> (64 - level)) == 0;
}

bool same_slos(const std::vector<Slo>& a, const std::vector<Slo>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].metric != b[i].metric || a[i].percentile != b[i].percentile || a[i].threshold_ms != b[i].threshold_ms) {
      return false;
    }
  }
  return true;
}

}  // namespace

MetricsCollector::MetricsCollector(CollectorOptions options) : options_(std::move(options)) {
  if (options_.exact_requests == 0) switch_to_histograms();
}

void MetricsCollector::sample_backlog(Time arrival, Time ttft) {
  if (!in_sample(arrival, ttft, backlog_level_)) return;
  backlog_sample_.emplace_back(arrival, ttft);
  while (backlog_sample_.size() > kBacklogSample) {
    ++backlog_level_;
    std::erase_if(backlog_sample_, [&](const std::pair<Time, Time>& p) { return !in_sample(p.first, p.second, backlog_level_); });
  }
}

void MetricsCollector::stream_completed(Time arrival, Time ttft, Time e2el, double tpot_ns, Time max_itl) {
  ttft_h_.add(ttft);
  e2el_h_.add(e2el);
  if (tpot_ns >= 0) tpot_ps_h_.add(tpot_ps(tpot_ns));
  bool good = true;
  for (std::size_t k = 0; k < options_.slos.size(); ++k) {
    double value = 0;
    switch (options_.slos[k].metric) {
      case Metric::ttft: value = static_cast<double>(ttft); break;
      case Metric::tpot: value = tpot_ns; break;
      case Metric::itl: value = static_cast<double>(max_itl); break;
      case Metric::e2el: value = static_cast<double>(e2el); break;
    }
    // The same comparison summarize() makes in exact mode.
    const bool ok = value < 0 || value <= options_.slos[k].threshold_ms * 1e6;
    slo_met_[k] += ok ? 1 : 0;
    good = good && ok;
  }
  good_ += good ? 1 : 0;
  sample_backlog(arrival, ttft);
}

// Folds the values kept one by one into the histograms and frees them.
void MetricsCollector::switch_to_histograms() {
  streaming_ = true;
  slo_met_.assign(options_.slos.size(), 0);
  for (std::size_t i = 0; i < ttft_ns_.size(); ++i) {
    stream_completed(arrival_ns_[i], ttft_ns_[i], e2el_ns_[i], tpot_ns_[i], max_itl_ns_[i]);
  }
  for (const Time v : kv_wait_ns_) kv_wait_h_.add(v);
  for (const Time v : kv_transfer_ns_) kv_transfer_h_.add(v);
  for (auto* v : {&ttft_ns_, &e2el_ns_, &max_itl_ns_, &arrival_ns_, &kv_wait_ns_, &kv_transfer_ns_}) {
    std::vector<Time>().swap(*v);
  }
  std::vector<double>().swap(tpot_ns_);
}

// The load a record put on its replica (and on its prefill replica when it
// was handed off between pools).
void MetricsCollector::tally_replica_load(const RequestRecord& r) {
  if (r.replica < 0) return;  // rejected before routing
  const auto prompt = static_cast<std::uint64_t>(r.prompt_tokens);
  const auto output = static_cast<std::uint64_t>(r.output_tokens);
  auto& tally = replicas_[r.replica];
  ++tally.requests;
  if (r.prefill_replica >= 0 && r.prefill_replica != r.replica) {
    // Handed off between pools: the prefill replica computed the prompt,
    // this one the output; each served the request.
    auto& prefill = replicas_[r.prefill_replica];
    ++prefill.requests;
    prefill.tokens += prompt;
    tally.tokens += output;
  } else if (r.outcome != Outcome::rejected) {  // a rejected prompt never loaded the replica
    tally.tokens += prompt + output;
  }
}

void MetricsCollector::add(const RequestRecord& r) {
  if (r.arrival < 0) bad_request(r, "negative arrival time");
  if (r.finish != kNoTime && r.finish < r.arrival) bad_request(r, "finish before arrival");
  if (r.first_token != kNoTime && r.first_token < r.arrival) bad_request(r, "first token before arrival");
  if (r.prompt_tokens < 0 || r.output_tokens < 0 || r.cached_prompt_tokens < 0 || r.preemptions < 0) {
    bad_request(r, "negative token or preemption count");
  }
  if (r.outcome == Outcome::finished) {
    if (r.finish == kNoTime) bad_request(r, "finished without a finish time");
    if (r.output_tokens < 1 || r.first_token == kNoTime) bad_request(r, "finished without a first token");
    if (r.finish < r.first_token) bad_request(r, "finish before first token");
    if (!r.itl.empty() && r.itl.size() != static_cast<std::size_t>(r.output_tokens - 1)) {
      bad_request(r, std::to_string(r.itl.size()) + " inter-token gaps for " +
                         std::to_string(r.output_tokens) + " output tokens (expected output_tokens - 1)");
    }
    for (const Time gap : r.itl) {
      if (gap < 0) bad_request(r, "negative inter-token gap");
    }
  }

  ++num_requests_;
  if (first_arrival_ == kNoTime || r.arrival < first_arrival_) first_arrival_ = r.arrival;
  if (last_arrival_ == kNoTime || r.arrival > last_arrival_) last_arrival_ = r.arrival;
  if (r.finish != kNoTime && r.finish > last_finish_) last_finish_ = r.finish;
  preemptions_ += static_cast<std::uint64_t>(r.preemptions);
  if (r.prefill_replica >= 0 && r.prefill_replica != r.replica) ++handed_off_;
  if (r.kv_arrived != kNoTime) {
    if (r.kv_reserved == kNoTime || r.first_token == kNoTime || r.kv_reserved < r.first_token ||
        r.kv_arrived < r.kv_reserved) {
      bad_request(r, "KV transfer times out of order (first token, blocks reserved, KV arrived)");
    }
    if (streaming_) {
      kv_wait_h_.add(r.kv_reserved - r.first_token);
      kv_transfer_h_.add(r.kv_arrived - r.kv_reserved);
    } else {
      kv_wait_ns_.push_back(r.kv_reserved - r.first_token);
      kv_transfer_ns_.push_back(r.kv_arrived - r.kv_reserved);
    }
    transfer_bytes_ += static_cast<std::uint64_t>(std::max<std::int64_t>(0, r.kv_transfer_bytes));
  }
  tally_replica_load(r);

  switch (r.outcome) {
    case Outcome::rejected: ++rejected_; return;
    case Outcome::aborted: ++aborted_; return;
    case Outcome::finished: break;
  }
  ++completed_;
  if (!streaming_ && completed_ > options_.exact_requests) switch_to_histograms();
  const double tpot = r.output_tokens >= 2
                          ? static_cast<double>(r.finish - r.first_token) / static_cast<double>(r.output_tokens - 1)
                          : -1.0;
  const Time max_itl = r.itl.empty() ? kNoTime : *std::max_element(r.itl.begin(), r.itl.end());
  if (streaming_) {
    stream_completed(r.arrival, r.first_token - r.arrival, r.finish - r.arrival, tpot, max_itl);
  } else {
    ttft_ns_.push_back(r.first_token - r.arrival);
    arrival_ns_.push_back(r.arrival);
    e2el_ns_.push_back(r.finish - r.arrival);
    tpot_ns_.push_back(tpot);
    max_itl_ns_.push_back(max_itl);
  }
  itl_ns_.add_all(r.itl);
  peaks_.add(r);
  input_tokens_ += static_cast<std::uint64_t>(r.prompt_tokens);
  output_tokens_ += static_cast<std::uint64_t>(r.output_tokens);
  cached_tokens_ += static_cast<std::uint64_t>(r.cached_prompt_tokens);
}

void MetricsCollector::add(const StepRecord& s) {
  if (s.duration < 0 || s.batch_size < 0 || s.kv_blocks_used < 0) {
    throw Error("step record " + std::to_string(s.step_id) + " of replica " + std::to_string(s.replica) +
                ": negative duration, batch size or KV blocks");
  }
  steps_.add(s);
}

void MetricsCollector::add(const StepTally& tally) {
  if (tally.batch_size_sum < 0 || tally.kv_blocks_sum < 0) throw Error("step tally: negative batch sizes or KV blocks");
  steps_.merge(tally);
}

// Every summary figure, filled in the order summary.json lists it, one
// section at a time.
Summary MetricsCollector::summarize(const SummaryContext& context) const {
  Summary s;
  s.num_requests = num_requests_;
  s.completed = completed_;
  s.rejected = rejected_;
  s.aborted = aborted_;

  if (streaming_ && !same_slos(context.slos, options_.slos)) {
    throw Error("metrics collector: past " + std::to_string(options_.exact_requests) +
                " requests goodput is counted as records arrive, so the SLOs must be given when the collector is made");
  }
  s.percentiles_streamed = streaming_;
  // Exact mode: the sorted values; streaming: empty, the histograms answer.
  const SortedLatencies sorted{sorted_ms(ttft_ns_), sorted_ms(tpot_ns_), sorted_ms(e2el_ns_)};
  summarize_latencies(sorted, s);
  summarize_goodput(context, sorted, s);
  s.prefix_cache_hit_rate =
      input_tokens_ > 0 ? static_cast<double>(cached_tokens_) / static_cast<double>(input_tokens_) : 0.0;
  s.preemptions = preemptions_;
  s.disaggregated = context.disaggregated;
  if (s.disaggregated) summarize_transfers(s.kv_transfer);
  summarize_replicas(context, s);
  summarize_steps(context, s);
  summarize_backlog(s);
  s.kv_blocks_capacity = context.kv_blocks_capacity;
  s.simulated_time_s = context.simulated_time_s;
  s.wall_time_s = context.wall_time_s;
  s.config = context.config;
  return s;
}

void MetricsCollector::summarize_latencies(const SortedLatencies& sorted, Summary& s) const {
  s.ttft_ms = streaming_ ? stats_of_histogram(ttft_h_, 1e6) : stats_of_sorted(sorted.ttft);
  s.tpot_ms = streaming_ ? stats_of_histogram(tpot_ps_h_, 1e9) : stats_of_sorted(sorted.tpot);
  s.e2el_ms = streaming_ ? stats_of_histogram(e2el_h_, 1e6) : stats_of_sorted(sorted.e2el);
  s.itl_ms = stats_of_histogram(itl_ns_);

  if (first_arrival_ != kNoTime && last_finish_ != kNoTime && last_finish_ > first_arrival_) {
    s.duration_s = to_seconds(last_finish_ - first_arrival_);
  }
  s.total_input_tokens = input_tokens_;
  s.total_output_tokens = output_tokens_;
  s.request_throughput = rate(static_cast<double>(completed_), s.duration_s);
  s.input_throughput = rate(static_cast<double>(input_tokens_), s.duration_s);
  s.output_throughput = rate(static_cast<double>(output_tokens_), s.duration_s);
  s.total_token_throughput = rate(static_cast<double>(input_tokens_ + output_tokens_), s.duration_s);
  s.max_output_tokens_per_s = peaks_.max_output_tokens_per_s();
  s.max_concurrent_requests = peaks_.max_concurrent_requests();
}

// The requests meeting every SLO (goodput), and per SLO the fraction of
// requests meeting it and, for a percentile SLO, the measured percentile.
void MetricsCollector::summarize_goodput(const SummaryContext& context, const SortedLatencies& sorted,
                                         Summary& s) const {
  // Per-request value compared with each SLO's threshold, in ns; a request
  // without the value (one output token: no TPOT, no gaps) passes, as in
  // vLLM's benchmark goodput.
  const auto request_value_ns = [&](Metric m, std::size_t i) -> double {
    switch (m) {
      case Metric::ttft: return static_cast<double>(ttft_ns_[i]);
      case Metric::tpot: return tpot_ns_[i];
      case Metric::itl: return static_cast<double>(max_itl_ns_[i]);
      case Metric::e2el: return static_cast<double>(e2el_ns_[i]);
    }
    return 0;
  };
  std::vector<std::uint64_t> met(context.slos.size(), 0);
  if (streaming_) {
    met = slo_met_;
    s.good_requests = good_;
  }
  for (std::size_t i = 0; i < ttft_ns_.size(); ++i) {
    bool good = true;
    for (std::size_t k = 0; k < context.slos.size(); ++k) {
      const double value = request_value_ns(context.slos[k].metric, i);
      const bool ok = value < 0 || value <= context.slos[k].threshold_ms * 1e6;
      met[k] += ok ? 1 : 0;
      good = good && ok;
    }
    s.good_requests += good ? 1 : 0;
  }
  s.goodput = rate(static_cast<double>(s.good_requests), s.duration_s);
  for (std::size_t k = 0; k < context.slos.size(); ++k) {
    SloResult result;
    result.slo = context.slos[k];
    result.measured_ms = result.slo.percentile > 0 ? slo_percentile_ms(result.slo, sorted) : kNaN;
    if (result.slo.percentile > 0)
      result.percentile_met = !std::isnan(result.measured_ms) && result.measured_ms <= result.slo.threshold_ms;
    result.request_fraction_met =
        num_requests_ > 0 ? static_cast<double>(met[k]) / static_cast<double>(num_requests_) : 0.0;
    s.slos.push_back(result);
  }
}

double MetricsCollector::slo_percentile_ms(const Slo& slo, const SortedLatencies& sorted) const {
  switch (slo.metric) {
    case Metric::ttft:
      return streaming_ ? ttft_h_.percentile(slo.percentile) / 1e6 : percentile_linear(sorted.ttft, slo.percentile);
    case Metric::tpot:
      return streaming_ ? tpot_ps_h_.percentile(slo.percentile) / 1e9 : percentile_linear(sorted.tpot, slo.percentile);
    case Metric::e2el:
      return streaming_ ? e2el_h_.percentile(slo.percentile) / 1e6 : percentile_linear(sorted.e2el, slo.percentile);
    case Metric::itl: return itl_ns_.percentile(slo.percentile) / 1e6;
  }
  return kNaN;
}

void MetricsCollector::summarize_transfers(TransferSummary& t) const {
  t.handed_off = handed_off_;
  t.bytes = transfer_bytes_;
  if (streaming_) {
    t.transfers = kv_transfer_h_.count();
    t.transfer_s =
        kv_transfer_h_.count() > 0 ? kv_transfer_h_.mean() * static_cast<double>(kv_transfer_h_.count()) / 1e9 : 0.0;
    t.wait_ms = stats_of_histogram(kv_wait_h_, 1e6);
    t.transfer_ms = stats_of_histogram(kv_transfer_h_, 1e6);
  } else {
    t.transfers = kv_transfer_ns_.size();
    const std::vector<double> transfer = sorted_ms(kv_transfer_ns_);
    long double sum_ms = 0;
    for (const double v : transfer) sum_ms += v;
    t.transfer_s = static_cast<double>(sum_ms / 1000.0L);
    t.wait_ms = stats_of_sorted(sorted_ms(kv_wait_ns_));
    t.transfer_ms = stats_of_sorted(transfer);
  }
}

void MetricsCollector::summarize_replicas(const SummaryContext& context, Summary& s) const {
  auto tallies = replicas_;
  for (std::int32_t r = 0; r < context.num_replicas; ++r) tallies[r];  // idle replicas count too
  std::vector<double> requests_per_replica, tokens_per_replica;
  for (const auto& [replica, tally] : tallies) {
    s.replicas.push_back({replica, tally.requests, tally.tokens});
    requests_per_replica.push_back(static_cast<double>(tally.requests));
    tokens_per_replica.push_back(static_cast<double>(tally.tokens));
  }
  s.replica_requests = spread_of(requests_per_replica);
  s.replica_tokens = spread_of(tokens_per_replica);
}

// The step tallies: speculation, KV and batch means and peaks, energy.
void MetricsCollector::summarize_steps(const SummaryContext& context, Summary& s) const {
  s.num_steps = steps_.steps;
  s.spec_proposed_tokens = steps_.proposed_tokens;
  s.spec_accepted_tokens = steps_.accepted_tokens;
  s.spec_verifications = steps_.verifications;
  if (steps_.proposed_tokens > 0) {
    s.spec_acceptance_rate = static_cast<double>(steps_.accepted_tokens) / static_cast<double>(steps_.proposed_tokens);
  }
  if (steps_.verifications > 0) {
    s.spec_mean_accepted_tokens = static_cast<double>(steps_.accepted_tokens) / static_cast<double>(steps_.verifications);
    s.spec_tokens_per_verification = 1.0 + s.spec_mean_accepted_tokens;
  }
  if (steps_.steps > 0) {
    // As long doubles, as when the sums were kept in them (exact either way).
    const auto steps = static_cast<long double>(steps_.steps);
    s.mean_kv_blocks_used = static_cast<double>(static_cast<long double>(steps_.kv_blocks_sum) / steps);
    s.mean_batch_size = static_cast<double>(static_cast<long double>(steps_.batch_size_sum) / steps);
  }
  s.max_kv_blocks_used = static_cast<double>(steps_.kv_blocks_max);
  s.energy = summarize_energy(steps_, context.energy, first_arrival_, last_finish_, output_tokens_, completed_);
  s.measured_energy = context.measured_energy;
  if (s.measured_energy && s.measured_energy->known && output_tokens_ > 0) {
    s.measured_energy->joules_per_output_token = s.measured_energy->joules / static_cast<double>(output_tokens_);
  }
  s.max_batch_size = static_cast<double>(steps_.batch_size_max);
}

// Whether the queue grew all along (the backlog warning), judged on the
// requests' arrivals and TTFTs.
void MetricsCollector::summarize_backlog(Summary& s) const {
  std::vector<std::pair<Time, Time>> arrival_ttft;
  if (streaming_) {
    arrival_ttft = backlog_sample_;
  } else {
    arrival_ttft.resize(ttft_ns_.size());
    for (std::size_t i = 0; i < ttft_ns_.size(); ++i) arrival_ttft[i] = {arrival_ns_[i], ttft_ns_[i]};
  }
  const BacklogTrend trend = backlog_trend(std::move(arrival_ttft), num_requests_, first_arrival_, last_arrival_);
  s.offered_rate = trend.offered_rate;
  if (auto warning = backlog_warning(trend, s.request_throughput)) s.warnings.push_back(std::move(*warning));
  s.overloaded = trend.falling_behind;
}

}  // namespace twin
