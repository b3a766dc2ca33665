#include "validate/comparison.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "metrics/percentile.hpp"

namespace twin {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void add_latency(std::vector<MetricComparison>& out, const char* name, const LatencyStats& m, const LatencyStats& p) {
  const auto one = [&](const char* stat, double mv, double pv) {
    out.push_back(MetricComparison{name, stat, mv, pv, error_pct(mv, pv)});
  };
  const bool has_m = m.count > 0, has_p = p.count > 0;
  one("p50", has_m ? m.p50 : kNaN, has_p ? p.p50 : kNaN);
  one("p90", has_m ? m.p90 : kNaN, has_p ? p.p90 : kNaN);
  one("p99", has_m ? m.p99 : kNaN, has_p ? p.p99 : kNaN);
}

std::map<RequestId, const RequestRecord*> finished_by_id(const std::vector<RequestRecord>& records) {
  std::map<RequestId, const RequestRecord*> out;
  for (const RequestRecord& r : records) {
    if (r.outcome == Outcome::finished) out[r.id] = &r;
  }
  return out;
}

double tpot_ns(const RequestRecord& r) {
  return static_cast<double>(r.finish - r.first_token) / static_cast<double>(r.output_tokens - 1);
}

std::string describe(RequestId id, const char* field, long long a, long long b) {
  return "request " + std::to_string(id) + ": " + field + " " + std::to_string(a) + " measured, " +
         std::to_string(b) + " replayed";
}

}  // namespace

double error_pct(double measured, double predicted) {
  if (std::isnan(measured) || std::isnan(predicted) || measured == 0) return kNaN;
  return (predicted - measured) / measured * 100.0;
}

std::vector<MetricComparison> compare_summaries(const Summary& measured, const Summary& predicted) {
  std::vector<MetricComparison> out;
  add_latency(out, "ttft_ms", measured.ttft_ms, predicted.ttft_ms);
  add_latency(out, "tpot_ms", measured.tpot_ms, predicted.tpot_ms);
  add_latency(out, "itl_ms", measured.itl_ms, predicted.itl_ms);
  add_latency(out, "e2el_ms", measured.e2el_ms, predicted.e2el_ms);
  out.push_back(MetricComparison{"output_throughput", "value", measured.output_throughput, predicted.output_throughput,
                                 error_pct(measured.output_throughput, predicted.output_throughput)});
  return out;
}

std::vector<MetricComparison> compare_to_runs(const std::vector<const Summary*>& measured_runs,
                                              const Summary& predicted) {
  if (measured_runs.empty()) return {};
  std::vector<MetricComparison> out = compare_summaries(*measured_runs.front(), predicted);
  std::vector<std::vector<double>> values(out.size());
  for (const Summary* run : measured_runs) {
    const std::vector<MetricComparison> one = compare_summaries(*run, predicted);
    for (std::size_t i = 0; i < one.size(); ++i) {
      if (!std::isnan(one[i].measured)) values[i].push_back(one[i].measured);
    }
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::sort(values[i].begin(), values[i].end());
    out[i].measured = values[i].empty() ? kNaN : percentile_linear(values[i], 50);
    out[i].error_pct = error_pct(out[i].measured, out[i].predicted);
  }
  return out;
}

std::vector<RequestErrorStats> request_errors(const std::vector<RequestRecord>& measured,
                                              const std::vector<RequestRecord>& predicted) {
  const auto m = finished_by_id(measured), p = finished_by_id(predicted);
  std::vector<double> ttft, tpot, e2el;
  for (const auto& [id, mr] : m) {
    const auto it = p.find(id);
    if (it == p.end()) continue;
    const RequestRecord& pr = *it->second;
    ttft.push_back(error_pct(static_cast<double>(mr->first_token - mr->arrival),
                             static_cast<double>(pr.first_token - pr.arrival)));
    e2el.push_back(error_pct(static_cast<double>(mr->finish - mr->arrival), static_cast<double>(pr.finish - pr.arrival)));
    if (mr->output_tokens >= 2 && pr.output_tokens >= 2) tpot.push_back(error_pct(tpot_ns(*mr), tpot_ns(pr)));
  }
  std::vector<RequestErrorStats> out;
  for (auto& [name, values] : {std::pair<const char*, std::vector<double>*>{"ttft", &ttft}, {"tpot", &tpot},
                               {"e2el", &e2el}}) {
    std::vector<double> v;
    for (double x : *values) {
      if (!std::isnan(x)) v.push_back(x);
    }
    std::sort(v.begin(), v.end());
    RequestErrorStats s;
    s.metric = name;
    s.count = static_cast<std::int64_t>(v.size());
    s.p10 = percentile_linear(v, 10);
    s.p50 = percentile_linear(v, 50);
    s.p90 = percentile_linear(v, 90);
    double abs_sum = 0;
    for (double x : v) abs_sum += std::abs(x);
    s.mean_abs = v.empty() ? kNaN : abs_sum / static_cast<double>(v.size());
    out.push_back(s);
  }
  return out;
}

ParityResult compare_parity(const std::vector<RequestRecord>& measured, const std::vector<RequestRecord>& replayed) {
  ParityResult out;
  out.requests = static_cast<std::int64_t>(measured.size());
  std::map<RequestId, const RequestRecord*> by_id;
  for (const RequestRecord& r : replayed) by_id[r.id] = &r;
  auto note = [&](const std::string& what) {
    if (out.first_mismatch.empty()) out.first_mismatch = what;
  };
  auto gap = [&](Time a, Time b) {
    const Time d = a > b ? a - b : b - a;
    out.max_abs_ns = std::max(out.max_abs_ns, d);
    return d;
  };
  for (const RequestRecord& m : measured) {
    const auto it = by_id.find(m.id);
    if (it == by_id.end()) {
      ++out.mismatched;
      note("request " + std::to_string(m.id) + " is missing from the replay");
      continue;
    }
    const RequestRecord& r = *it->second;
    bool differs = false;
    auto check = [&](const char* field, long long a, long long b) {
      if (a == b) return;
      differs = true;
      note(describe(m.id, field, a, b));
    };
    check("outcome", static_cast<long long>(m.outcome), static_cast<long long>(r.outcome));
    check("output_tokens", m.output_tokens, r.output_tokens);
    check("cached_prompt_tokens", m.cached_prompt_tokens, r.cached_prompt_tokens);
    check("preemptions", m.preemptions, r.preemptions);
    check("itl gaps", static_cast<long long>(m.itl.size()), static_cast<long long>(r.itl.size()));
    if (gap(m.arrival, r.arrival) > 0) check("arrival_ns", m.arrival, r.arrival);
    if (gap(m.first_token, r.first_token) > 0) check("first_token_ns", m.first_token, r.first_token);
    if (gap(m.finish, r.finish) > 0) check("finish_ns", m.finish, r.finish);
    for (std::size_t k = 0; k < std::min(m.itl.size(), r.itl.size()); ++k) {
      if (gap(m.itl[k], r.itl[k]) > 0) check("itl_ns", m.itl[k], r.itl[k]);
    }
    if (differs) ++out.mismatched;
  }
  if (replayed.size() > measured.size()) {
    out.mismatched += static_cast<std::int64_t>(replayed.size() - measured.size());
    note("the replay has " + std::to_string(replayed.size()) + " records, the engine " + std::to_string(measured.size()));
  }
  return out;
}

}  // namespace twin
