#include "serve/serve_metrics.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/types.hpp"

namespace twin {
namespace {

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A Prometheus label value: backslash, quote and newline escaped.
std::string label_value(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  std::int64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + labels + ",le=\"" + (i < bounds_.size() ? number(bounds_[i]) : "+Inf") + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += name + "_sum{" + labels + "} " + number(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

namespace {

// vLLM's buckets for per-request token counts: 1, 2, 5, 10, 20, 50, ...
// up to max_model_len (vllm/v1/metrics/loggers.py, build_1_2_5_buckets).
std::vector<double> one_two_five(std::int64_t max_value) {
  std::vector<double> out;
  for (double mantissa_base = 1;; mantissa_base *= 10) {
    for (const double m : {1.0, 2.0, 5.0}) {
      const double v = m * mantissa_base;
      if (v > static_cast<double>(std::max<std::int64_t>(max_value, 1))) return out;
      out.push_back(v);
    }
  }
}

const std::vector<double> kRequestLatencyBuckets = {0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,   10.0, 15.0, 20.0,
                                                    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,  0.5,
                                                  0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};

}  // namespace

// The bucket bounds (seconds) of vLLM's histograms of the same names.
ServeMetrics::ServeMetrics(std::string model_name, std::int64_t max_model_len)
    : labels_("model_name=\"" + label_value(model_name) + "\""),
      ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0, 160.0, 640.0, 2560.0}),
      itl_(kTokenLatencyBuckets),
      e2e_(kRequestLatencyBuckets),
      queue_(kRequestLatencyBuckets),
      prefill_(kRequestLatencyBuckets),
      decode_(kRequestLatencyBuckets),
      inference_(kRequestLatencyBuckets),
      tpot_(kTokenLatencyBuckets),
      prompt_len_(one_two_five(max_model_len)),
      generation_len_(one_two_five(max_model_len)) {}

void ServeMetrics::set_gauges(const ServeGauges& gauges) {
  const std::lock_guard lock(mutex_);
  gauges_ = gauges;
}

void ServeMetrics::add_generation_tokens(std::int64_t n) {
  const std::lock_guard lock(mutex_);
  generation_tokens_ += n;
}

void ServeMetrics::on_request_end(const RequestRecord& r, const std::string& finish_reason) {
  const std::lock_guard lock(mutex_);
  if (r.outcome == Outcome::rejected) return;
  prompt_tokens_ += r.prompt_tokens;
  if (r.first_token != kNoTime) ttft_.observe(to_seconds(r.first_token - r.arrival));
  for (const Time gap : r.itl) itl_.observe(to_seconds(gap));
  preemptions_ += r.preemptions;
  if (r.outcome == Outcome::finished) {
    e2e_.observe(to_seconds(r.finish - r.arrival));
    ++success_[finish_reason == "stop" ? 0 : 1];
    prompt_len_.observe(r.prompt_tokens);
    generation_len_.observe(r.output_tokens);
    if (r.first_scheduled != kNoTime) {
      queue_.observe(to_seconds(r.first_scheduled - r.arrival));
      inference_.observe(to_seconds(r.finish - r.first_scheduled));
      if (r.first_token != kNoTime) prefill_.observe(to_seconds(r.first_token - r.first_scheduled));
    }
    if (r.first_token != kNoTime) {
      decode_.observe(to_seconds(r.finish - r.first_token));
      if (r.output_tokens > 1) tpot_.observe(to_seconds(r.finish - r.first_token) / (r.output_tokens - 1));
    }
  } else {
    ++success_[2];
  }
}

std::string ServeMetrics::render() const {
  const std::lock_guard lock(mutex_);
  std::string out;
  const std::string& l = labels_;
  header(out, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  out += "vllm:num_requests_running{" + l + "} " + std::to_string(gauges_.running) + "\n";
  header(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  out += "vllm:num_requests_waiting{" + l + "} " + std::to_string(gauges_.waiting) + "\n";
  header(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  out += "vllm:kv_cache_usage_perc{" + l + "} " + number(gauges_.kv_usage) + "\n";
  header(out, "vllm:prefix_cache_queries", "counter", "Prefix cache queries, in terms of number of queried tokens.");
  out += "vllm:prefix_cache_queries_total{" + l + "} " + std::to_string(gauges_.prefix_queries) + "\n";
  header(out, "vllm:prefix_cache_hits", "counter", "Prefix cache hits, in terms of number of cached tokens.");
  out += "vllm:prefix_cache_hits_total{" + l + "} " + std::to_string(gauges_.prefix_hits) + "\n";
  header(out, "vllm:prompt_tokens", "counter", "Number of prefill tokens processed.");
  out += "vllm:prompt_tokens_total{" + l + "} " + std::to_string(prompt_tokens_) + "\n";
  header(out, "vllm:generation_tokens", "counter", "Number of generation tokens processed.");
  out += "vllm:generation_tokens_total{" + l + "} " + std::to_string(generation_tokens_) + "\n";
  header(out, "vllm:request_success", "counter", "Count of successfully processed requests.");
  const char* reasons[] = {"stop", "length", "abort"};
  for (std::size_t i = 0; i < success_.size(); ++i) {
    out += "vllm:request_success_total{" + l + ",finished_reason=\"" + reasons[i] + "\"} " +
           std::to_string(success_[i]) + "\n";
  }
  header(out, "vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.");
  ttft_.render(out, "vllm:time_to_first_token_seconds", l);
  header(out, "vllm:inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds.");
  itl_.render(out, "vllm:inter_token_latency_seconds", l);
  header(out, "vllm:e2e_request_latency_seconds", "histogram", "Histogram of end to end request latency in seconds.");
  e2e_.render(out, "vllm:e2e_request_latency_seconds", l);
  header(out, "vllm:num_preemptions", "counter", "Cumulative number of preemption from the engine.");
  out += "vllm:num_preemptions_total{" + l + "} " + std::to_string(preemptions_) + "\n";
  const struct {
    const Histogram* h;
    const char* name;
    const char* help;
  } per_request[] = {
      {&queue_, "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."},
      {&inference_, "vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request."},
      {&prefill_, "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request."},
      {&decode_, "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request."},
      {&tpot_, "vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request."},
      {&prompt_len_, "vllm:request_prompt_tokens", "Number of prefill tokens processed."},
      {&generation_len_, "vllm:request_generation_tokens", "Number of generation tokens processed."},
  };
  for (const auto& m : per_request) {
    header(out, m.name, "histogram", m.help);
    m.h->render(out, m.name, l);
  }
  return out;
}

}  // namespace twin
