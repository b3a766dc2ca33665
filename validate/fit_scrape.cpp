#include "validate/fit_scrape.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.hpp"
#include "validate/trace_requests.hpp"

namespace twin {
namespace {

bool token_basis(const ScrapeRun& s) { return s.tpot_basis == "token"; }

// The histogram a metric is measured by.
const ScrapeHistogram& histogram_for(const ScrapeTotals& t, int metric, const ScrapeRun& s) {
  if (metric == kTtft) return t.ttft;
  if (metric == kE2e) return t.e2e;
  return token_basis(s) ? t.itl : t.tpot;
}

// The count that ranks a metric's requests: its own histogram's, except a
// per-token histogram's (tokens, not requests): the finished requests'.
double rank_count(const ScrapeTotals& t, int metric, const ScrapeRun& s) {
  if (metric == kTpot && token_basis(s)) return t.e2e.count;
  return histogram_for(t, metric, s).count;
}

// The simulated requests in the order the server's histogram of `metric`
// would have counted them: by first token (TTFT) or by end; a per-request
// TPOT counts only outputs of two tokens or more.
std::vector<std::size_t> observed_order(const std::vector<RequestRecord>& predicted, int metric, bool token_weighted) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < predicted.size(); ++i) {
    const RequestRecord& r = predicted[i];
    if (r.outcome != Outcome::finished || r.first_token == kNoTime || r.finish == kNoTime) continue;
    if (metric == kTpot && !token_weighted && r.output_tokens < 2) continue;
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return metric == kTtft ? predicted[a].first_token < predicted[b].first_token : predicted[a].finish < predicted[b].finish;
  });
  return order;
}

std::string count_text(double v) { return std::to_string(static_cast<long long>(std::llround(v))); }

// Prompt and output tokens the scrapes counted against the trace's.
void check_tokens(FitRun& run, const ScrapeRun& s, double finished) {
  const ScrapeTotals &a = s.scrapes.front(), &b = s.scrapes.back();
  double prompt = 0, output = 0;
  for (const Request& r : run.requests) {
    prompt += r.prompt_len;
    output += r.output_len;
  }
  const bool all = std::llround(finished) == static_cast<long long>(run.requests.size());
  if (all && a.has_prompt_tokens && prompt > 0) {
    const double counted = b.prompt_tokens - a.prompt_tokens;
    if (std::abs(counted - prompt) > 0.1 * prompt) {
      throw UsageError(run.path + ": " + s.engine + ":prompt_tokens_total grew by " + count_text(counted) +
                       " tokens over the run, the trace's requests have " + count_text(prompt) +
                       " prompt tokens: a run of another model or tokenizer, or of another trace?");
    }
  }
  if (all && a.has_generation_tokens && output > 0) {
    const double counted = b.generation_tokens - a.generation_tokens;
    if (counted < 0.9 * output || counted > 1.1 * output) {
      run.warnings.push_back(run.path + ": " + s.engine + ":generation_tokens_total grew by " + count_text(counted) +
                             " tokens, the trace asks for " + count_text(output) +
                             ": the server did not generate the trace's lengths (EOS without ignore_eos?); the "
                             "replay generates the trace's, so E2E is off by the difference");
    }
  }
}

std::string trace_hint(const ScrapeRun& s) {
  const ScrapeTotals &a = s.scrapes.front(), &b = s.scrapes.back();
  const double n = s.finished();
  std::string hint = "the scrapes counted " + count_text(n) + " finished requests";
  if (a.has_prompt_tokens && a.has_generation_tokens && n > 0) {
    hint += ", " + count_text((b.prompt_tokens - a.prompt_tokens) / n) + " prompt and " +
            count_text((b.generation_tokens - a.generation_tokens) / n) + " output tokens each on average";
  }
  return hint;
}

// The prefix cache's hit rate over the run, measured and replayed: a
// server whose cache holds earlier runs' prompts (or a trace whose sharing
// the replay does not know) hits where the replay does not.
void add_prefix_hits(RunScore& score, const ScrapeRun& s, const std::vector<RequestRecord>& predicted) {
  const ScrapeTotals &a = s.scrapes.front(), &b = s.scrapes.back();
  if (!b.has_prefix || !(b.prefix_queries - a.prefix_queries > 0)) return;
  score.measured_prefix_hit_pct = 100 * (b.prefix_hits - a.prefix_hits) / (b.prefix_queries - a.prefix_queries);
  double hits = 0, prompt = 0;
  for (const RequestRecord& r : predicted) {
    if (r.outcome != Outcome::finished) continue;
    hits += r.cached_prompt_tokens;
    prompt += r.prompt_tokens;
  }
  if (prompt > 0) score.predicted_prefix_hit_pct = 100 * hits / prompt;
}

}  // namespace

FitRun load_scrape_fit_run(const std::string& path, const std::string& trace, const TraceReadOptions& read,
                           std::int64_t max_requests) {
  auto scrape = std::make_shared<ScrapeRun>(read_scrape_run(path));
  const ScrapeRun& s = *scrape;
  if (trace.empty()) {
    throw UsageError("--measured " + path + ": scrapes of /metrics list no requests: give the trace the clients "
                     "played with --trace (" + trace_hint(s) + "; `twinserve trace generate` makes one of that shape)");
  }
  FitRun run;
  run.path = path;
  run.trace = trace;
  run.format = "prometheus";
  run.model_id = s.model_name;
  run.model_key = "label model_name (" + s.model_where + ")";
  run.requests = read_trace_requests(trace, read, max_requests);
  run.warnings = s.warnings;
  const double finished = s.finished();
  const auto n = static_cast<double>(run.requests.size());
  if (finished > n + 0.5) {
    throw UsageError("--measured " + path + ": the scrapes counted " + count_text(finished) +
                     " finished requests, the trace " + trace + " has " + count_text(n) +
                     ": other clients' requests are in them, or the first scrape was not taken before the run");
  }
  if (finished < n - 0.5) {
    run.warnings.push_back(path + ": " + count_text(finished) + " of the trace's " + count_text(n) +
                           " requests finished between the first and the last scrape; the fit compares the first " +
                           count_text(finished) + " the simulation finishes");
  }
  check_tokens(run, s, finished);
  run.scored.assign(s.intervals(), 1);
  run.scrape = std::move(scrape);
  return run;
}

void add_scrape_slots(std::size_t k, const FitRun& run, std::vector<ResidualSlot>& slots) {
  const ScrapeRun& s = *run.scrape;
  const ScrapeTotals& origin = s.scrapes.front();
  for (int m = 0; m < 3; ++m) {
    if (m == kTpot && s.tpot_basis.empty()) continue;
    for (std::size_t j = 0; j < s.intervals(); ++j) {
      if (!run.scored[j]) continue;
      const ScrapeTotals &a = s.scrapes[s.bounds[j]], &b = s.scrapes[s.bounds[j + 1]];
      const ScrapeHistogram grown = histogram_delta(histogram_for(b, m, s), histogram_for(a, m, s));
      if (!(grown.count > 0) || !(grown.sum > 0)) continue;
      ResidualSlot slot;
      slot.run = k;
      slot.metric = m;
      slot.measured_ms = grown.sum / grown.count * 1e3;
      slot.ranked = true;
      slot.token_weighted = m == kTpot && token_basis(s);
      slot.rank_lo = std::llround(rank_count(a, m, s) - rank_count(origin, m, s));
      slot.rank_hi = std::llround(rank_count(b, m, s) - rank_count(origin, m, s));
      if (slot.rank_hi > slot.rank_lo) slots.push_back(slot);
    }
  }
}

double ranked_slot_mean(const ResidualSlot& slot, const std::vector<RequestRecord>& predicted, std::int64_t& missing) {
  const std::vector<std::size_t> order = observed_order(predicted, slot.metric, slot.token_weighted);
  double sum = 0, weight = 0;
  missing = 0;
  for (std::int64_t r = slot.rank_lo; r < slot.rank_hi; ++r) {
    if (r >= static_cast<std::int64_t>(order.size())) {
      ++missing;
      continue;
    }
    const RequestRecord& rec = predicted[order[static_cast<std::size_t>(r)]];
    if (slot.token_weighted) {
      if (rec.output_tokens < 2) continue;
      sum += static_cast<double>(rec.finish - rec.first_token) / 1e6;
      weight += rec.output_tokens - 1;
    } else {
      sum += metric_ms(rec, slot.metric);
      weight += 1;
    }
  }
  return weight > 0 ? sum / weight : NAN;
}

RunScore score_scrape_run(const FitRun& run, const std::vector<RequestRecord>& predicted, bool complement) {
  const ScrapeRun& s = *run.scrape;
  const ScrapeTotals& origin = s.scrapes.front();
  RunScore score;
  score.run = run.path;
  for (int m = 0; m < 3; ++m) {
    MetricScore ms;
    ms.metric = kFitMetricNames[m];
    ms.mean_abs_request_error_pct = NAN;  // a scrape has no requests of its own
    ScrapeHistogram meas, pred;
    double pred_sum = 0, pred_weight = 0;
    const bool tokens = m == kTpot && token_basis(s);
    const std::vector<std::size_t> order = observed_order(predicted, m, tokens);
    for (std::size_t j = 0; j < s.intervals() && !(m == kTpot && s.tpot_basis.empty()); ++j) {
      if ((run.scored[j] != 0) == complement) continue;
      const ScrapeTotals &a = s.scrapes[s.bounds[j]], &b = s.scrapes[s.bounds[j + 1]];
      histogram_add(meas, histogram_delta(histogram_for(b, m, s), histogram_for(a, m, s)));
      if (!pred.present) {
        pred = meas;
        std::fill(pred.cumulative.begin(), pred.cumulative.end(), 0.0);
      }
      const auto lo = std::llround(rank_count(a, m, s) - rank_count(origin, m, s));
      const auto hi = std::llround(rank_count(b, m, s) - rank_count(origin, m, s));
      for (auto r = lo; r < hi && r < static_cast<long long>(order.size()); ++r) {
        const RequestRecord& rec = predicted[order[static_cast<std::size_t>(r)]];
        const double v = metric_ms(rec, m);
        if (!std::isfinite(v)) continue;
        const double w = tokens ? rec.output_tokens - 1 : 1;
        pred_sum += v * w;
        pred_weight += w;
        for (std::size_t i = 0; i < pred.bounds.size(); ++i)
          if (v / 1e3 <= pred.bounds[i]) pred.cumulative[i] += w;
      }
    }
    ms.count = std::llround(meas.count);
    if (meas.count > 0) ms.measured = MetricStats{meas.sum / meas.count * 1e3, histogram_quantile(meas, 0.5) * 1e3, histogram_quantile(meas, 0.9) * 1e3};
    if (pred_weight > 0) ms.predicted = MetricStats{pred_sum / pred_weight, histogram_quantile(pred, 0.5) * 1e3, histogram_quantile(pred, 0.9) * 1e3};
    score.metrics.push_back(ms);
  }
  add_prefix_hits(score, s, predicted);
  return score;
}

void score_scrape_half(FitRun& run, bool first_half) {
  const std::size_t n = run.scrape->intervals();
  if (n < 2) {
    throw UsageError("--holdout-split time: " + run.path + " has one interval between scrapes (" +
                     std::to_string(run.scrape->scrapes.size()) + " scrapes, at least " +
                     std::to_string(static_cast<int>(kMinScrapeRequests)) +
                     " requests finished in each): scrape during the run too, or give two runs");
  }
  for (std::size_t j = 0; j < n; ++j) run.scored[j] = (j < (n + 1) / 2) == first_half;
}

}  // namespace twin
