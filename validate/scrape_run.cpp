#include "validate/scrape_run.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <system_error>

#include "base/error.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

// The series each engine names; read from vllm/v1/metrics/loggers.py and
// sglang/srt/metrics/collector.py. Alternatives are older spellings.
struct EngineNames {
  const char* engine;
  const char* prefix;
  const char* ttft;
  const char* e2e;
  const char* tpot;  // per request; "" when the engine has none
  std::vector<const char*> itl;
  const char* iteration_tokens;
  const char* prompt_tokens;
  const char* generation_tokens;
  const char* running;
  const char* waiting;
  std::vector<const char*> prefix_queries;  // empty: the prompt tokens are the queries
  std::vector<const char*> prefix_hits;
  const char* preemptions;
};

const std::vector<EngineNames>& engines() {
  static const std::vector<EngineNames> table = {
      {"vllm", "vllm:", "vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
       "vllm:request_time_per_output_token_seconds",
       {"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"}, "vllm:iteration_tokens_total",
       "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_requests_running",
       "vllm:num_requests_waiting", {"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"},
       {"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}, "vllm:num_preemptions_total"},
      {"sglang", "sglang:", "sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds", "",
       {"sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"}, "",
       "sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_running_reqs",
       "sglang:num_queue_reqs", {}, {"sglang:cached_tokens_total"}, "sglang:num_retracted_requests_total"},
  };
  return table;
}

std::string where(const PromScrape& s, std::int64_t line) { return s.source + ":" + std::to_string(line); }

const EngineNames& engine_of(const PromScrape& s) {
  for (const PromSample& x : s.samples)
    for (const EngineNames& e : engines())
      if (x.name == std::string(e.e2e) + "_count") return e;
  throw Error(where(s, s.first_line) + ": a scrape without vllm:e2e_request_latency_seconds or "
              "sglang:e2e_request_latency_seconds: not the /metrics of vLLM, SGLang or twinserve serve");
}

// The model the scrape's series are of; several is an error.
void note_model(const PromScrape& s, const EngineNames& e, ScrapeRun& run) {
  for (const PromSample& x : s.samples) {
    if (x.name.rfind(e.prefix, 0) != 0) continue;
    const std::string* m = x.label("model_name");
    if (!m) m = x.label("name");  // SGLang before its model_name label
    if (!m) continue;
    if (run.model_name.empty()) {
      run.model_name = *m;
      run.model_where = where(s, x.line);
    } else if (*m != run.model_name) {
      throw Error(where(s, x.line) + ": label model_name \"" + excerpt(*m, 80) + "\", but " + run.model_where +
                  " has \"" + excerpt(run.model_name, 80) +
                  "\": scrapes of several models; give scrapes of the one deployment calibrated");
    }
  }
}

double finite_value(const PromScrape& s, const PromSample& x) {
  if (!std::isfinite(x.value) || x.value < 0) {
    throw Error(where(s, x.line) + ": " + x.name + " is " + std::to_string(x.value) + ": a count must be finite and >= 0");
  }
  return x.value;
}

ScrapeHistogram histogram_of(const PromScrape& s, const std::string& name) {
  ScrapeHistogram h;
  std::map<double, double> buckets;
  for (const PromSample& x : s.samples) {
    if (x.name == name + "_bucket") {
      const std::string* le = x.label("le");
      if (!le) throw Error(where(s, x.line) + ": " + x.name + " without its le label");
      double bound = INFINITY;
      if (*le != "+Inf" && *le != "Inf") {
        const char* first = le->data() + (!le->empty() && le->front() == '+' ? 1 : 0);
        const auto [end, ec] = std::from_chars(first, le->data() + le->size(), bound);
        if (ec != std::errc() || end != le->data() + le->size() || !std::isfinite(bound))
          throw Error(where(s, x.line) + ": le \"" + excerpt(*le, 40) + "\" is not a bucket bound");
      }
      buckets[bound] += finite_value(s, x);
      h.present = true;
    } else if (x.name == name + "_sum") {
      if (!std::isfinite(x.value)) throw Error(where(s, x.line) + ": " + x.name + " is not finite");
      h.sum += x.value;
    } else if (x.name == name + "_count") {
      h.count += finite_value(s, x);
      h.present = true;
    }
  }
  if (!h.present) return h;
  if (buckets.empty() || !std::isinf(buckets.rbegin()->first)) {
    throw Error(where(s, s.first_line) + ": histogram " + name + " has no le=\"+Inf\" bucket");
  }
  for (const auto& [bound, count] : buckets) {
    h.bounds.push_back(bound);
    h.cumulative.push_back(count);
  }
  return h;
}

// A counter or gauge summed over its label sets; false when absent.
bool scalar_of(const PromScrape& s, const std::vector<const char*>& names, double& out, bool counter) {
  for (const char* name : names) {
    bool found = false;
    double sum = 0;
    for (const PromSample& x : s.samples) {
      if (x.name != name) continue;
      sum += counter ? finite_value(s, x) : (std::isfinite(x.value) ? x.value : 0.0);
      found = true;
    }
    if (found) {
      out = sum;
      return true;
    }
  }
  return false;
}

ScrapeTotals totals_of(const PromScrape& s, const EngineNames& e) {
  ScrapeTotals t;
  t.where = where(s, s.first_line);
  t.ttft = histogram_of(s, e.ttft);
  t.e2e = histogram_of(s, e.e2e);
  if (*e.tpot) t.tpot = histogram_of(s, e.tpot);
  for (const char* name : e.itl) {
    if (!t.itl.present) t.itl = histogram_of(s, name);
  }
  if (*e.iteration_tokens) t.iteration_tokens = histogram_of(s, e.iteration_tokens);
  t.has_prompt_tokens = scalar_of(s, {e.prompt_tokens}, t.prompt_tokens, true);
  t.has_generation_tokens = scalar_of(s, {e.generation_tokens}, t.generation_tokens, true);
  t.has_prefix = scalar_of(s, e.prefix_hits, t.prefix_hits, true);
  if (t.has_prefix && !e.prefix_queries.empty()) t.has_prefix = scalar_of(s, e.prefix_queries, t.prefix_queries, true);
  else t.prefix_queries = t.prompt_tokens;
  scalar_of(s, {e.preemptions}, t.preemptions, true);
  scalar_of(s, {e.running}, t.running, false);
  scalar_of(s, {e.waiting}, t.waiting, false);
  return t;
}

[[noreturn]] void backwards(const ScrapeTotals& earlier, const ScrapeTotals& later, const std::string& what, double a,
                            double b) {
  throw Error(later.where + ": " + what + " went from " + std::to_string(a) + " (scrape at " + earlier.where + ") down to " +
              std::to_string(b) + ": a counter that goes backwards (the server restarted?); give the scrapes of one server's life");
}

void check_histogram(const ScrapeTotals& a, const ScrapeTotals& b, const ScrapeHistogram& x, const ScrapeHistogram& y,
                     const std::string& name) {
  if (x.present != y.present) throw Error(b.where + ": " + name + (y.present ? " appears" : " disappears") + " between scrapes (since " + a.where + ")");
  if (!x.present) return;
  if (x.bounds != y.bounds) throw Error(b.where + ": " + name + "'s buckets differ from the scrape at " + a.where);
  if (y.count < x.count) backwards(a, b, name + "_count", x.count, y.count);
  for (std::size_t i = 0; i < x.cumulative.size(); ++i)
    if (y.cumulative[i] < x.cumulative[i]) backwards(a, b, name + "_bucket", x.cumulative[i], y.cumulative[i]);
}

void check_order(const ScrapeTotals& a, const ScrapeTotals& b, const EngineNames& e) {
  check_histogram(a, b, a.ttft, b.ttft, e.ttft);
  check_histogram(a, b, a.e2e, b.e2e, e.e2e);
  check_histogram(a, b, a.tpot, b.tpot, e.tpot);
  check_histogram(a, b, a.itl, b.itl, "the inter-token latency histogram");
  check_histogram(a, b, a.iteration_tokens, b.iteration_tokens, e.iteration_tokens);
  if (b.prompt_tokens < a.prompt_tokens) backwards(a, b, e.prompt_tokens, a.prompt_tokens, b.prompt_tokens);
  if (b.generation_tokens < a.generation_tokens) backwards(a, b, e.generation_tokens, a.generation_tokens, b.generation_tokens);
  if (b.prefix_hits < a.prefix_hits) backwards(a, b, "the prefix-cache hits", a.prefix_hits, b.prefix_hits);
  if (b.preemptions < a.preemptions) backwards(a, b, e.preemptions, a.preemptions, b.preemptions);
}

std::vector<PromScrape> scrapes_at(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return read_prom_file(path);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(path, ec))
    if (entry.is_regular_file(ec)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<PromScrape> out;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string head(4096, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(in.gcount()));
    const std::string ext = f.extension().string();
    if ((ext != ".prom" && ext != ".txt" && ext != ".metrics") || !looks_like_prom_text(head)) continue;  // a README
    for (PromScrape& s : read_prom_file(f)) out.push_back(std::move(s));
  }
  return out;
}

void set_bounds(ScrapeRun& run) {
  run.bounds = {0};
  for (std::size_t j = 1; j < run.scrapes.size(); ++j) {
    if (run.scrapes[j].e2e.count - run.scrapes[run.bounds.back()].e2e.count >= kMinScrapeRequests) run.bounds.push_back(j);
  }
  const std::size_t last = run.scrapes.size() - 1;
  if (run.bounds.back() != last) {
    if (run.bounds.size() > 1) run.bounds.back() = last;  // a short tail joins the interval before it
    else run.bounds.push_back(last);
  }
}

}  // namespace

ScrapeHistogram histogram_delta(const ScrapeHistogram& later, const ScrapeHistogram& earlier) {
  ScrapeHistogram d = later;
  if (!earlier.present) return d;
  for (std::size_t i = 0; i < d.cumulative.size() && i < earlier.cumulative.size(); ++i) d.cumulative[i] -= earlier.cumulative[i];
  d.sum -= earlier.sum;
  d.count -= earlier.count;
  return d;
}

void histogram_add(ScrapeHistogram& into, const ScrapeHistogram& more) {
  if (!more.present) return;
  if (!into.present) {
    into = more;
    return;
  }
  for (std::size_t i = 0; i < into.cumulative.size() && i < more.cumulative.size(); ++i) into.cumulative[i] += more.cumulative[i];
  into.sum += more.sum;
  into.count += more.count;
}

double histogram_quantile(const ScrapeHistogram& h, double q) {
  if (!h.present || h.cumulative.empty() || !(h.cumulative.back() > 0)) return NAN;
  const double rank = q * h.cumulative.back();
  std::size_t i = 0;
  while (i + 1 < h.cumulative.size() && h.cumulative[i] < rank) ++i;
  const double low = i == 0 ? std::min(0.0, h.bounds[0]) : h.bounds[i - 1];
  const double below = i == 0 ? 0.0 : h.cumulative[i - 1];
  const double high = h.bounds[i];
  if (std::isinf(high)) return low;
  const double in_bucket = h.cumulative[i] - below;
  return low + (high - low) * (in_bucket > 0 ? (rank - below) / in_bucket : 1.0);
}

double ScrapeRun::finished() const {
  return scrapes.empty() ? 0 : scrapes.back().e2e.count - scrapes.front().e2e.count;
}

bool is_scrape_path(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "vllm_result.json", ec) || fs::exists(path / "requests.csv", ec)) return false;
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.is_regular_file(ec) && entry.path().extension() == ".prom") return true;
    return false;
  }
  if (path.extension() == ".prom") return true;
  if (path.extension() == ".json" || path.extension() == ".csv") return false;
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return looks_like_prom_text(head);
}

ScrapeRun read_scrape_run(const fs::path& path) {
  const std::vector<PromScrape> scrapes = scrapes_at(path);
  if (scrapes.size() < 2) {
    throw Error(path.string() + ": " + std::to_string(scrapes.size()) +
                " scrape(s) of /metrics; a run needs two or more (one before its first request, one after its last)");
  }
  ScrapeRun run;
  const EngineNames& e = engine_of(scrapes.front());
  run.engine = e.engine;
  for (const PromScrape& s : scrapes) {
    if (&engine_of(s) != &e) throw Error(where(s, s.first_line) + ": a scrape of another engine than the first (" + e.engine + ")");
    note_model(s, e, run);
    run.scrapes.push_back(totals_of(s, e));
    const ScrapeTotals& t = run.scrapes.back();
    if (!t.ttft.present) throw Error(t.where + ": the scrape has no " + std::string(e.ttft) + " histogram");
    if (run.scrapes.size() > 1) check_order(run.scrapes[run.scrapes.size() - 2], t, e);
  }
  const ScrapeTotals& last = run.scrapes.back();
  run.tpot_basis = last.tpot.present ? "request" : last.itl.present ? "token" : "";
  if (run.tpot_basis.empty()) run.warnings.push_back(path.string() + ": no TPOT or inter-token latency histogram: TPOT is not fitted");
  if (!(run.finished() > 0)) {
    throw Error(path.string() + ": no request finished between the first scrape (" + run.scrapes.front().where +
                ") and the last (" + last.where + "): nothing to fit");
  }
  if (run.finished() < kMinScrapeRequests) {
    run.warnings.push_back(path.string() + ": only " + std::to_string(static_cast<long long>(run.finished())) +
                           " requests finished between the scrapes: its means are noisy");
  }
  if (last.running + last.waiting > 0) {
    run.warnings.push_back(last.where + ": the last scrape saw " + std::to_string(static_cast<long long>(last.running)) +
                           " running and " + std::to_string(static_cast<long long>(last.waiting)) +
                           " waiting requests: scrape again after the run ends to see all of it");
  }
  set_bounds(run);
  return run;
}

}  // namespace twin
