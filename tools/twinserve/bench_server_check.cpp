#include "tools/twinserve/bench_server_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

#include "metrics/percentile.hpp"
#include "metrics/summary_json.hpp"

namespace twin::cli {
namespace {

double median_ms(std::vector<double> values_ms) {
  std::sort(values_ms.begin(), values_ms.end());
  return percentile_linear(values_ms, 50);
}

double ms(Time t) { return static_cast<double>(t) / 1e6; }

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

// A sample line's `le` label ("+Inf" or a number); nullopt when absent.
std::optional<double> le_of(const std::string& labels) {
  const std::size_t at = labels.find("le=\"");
  if (at == std::string::npos) return std::nullopt;
  const std::size_t start = at + 4;
  const std::size_t end = labels.find('"', start);
  if (end == std::string::npos) return std::nullopt;
  const std::string value = labels.substr(start, end - start);
  if (value == "+Inf" || value == "Inf" || value == "inf") return std::numeric_limits<double>::infinity();
  try {
    std::size_t used = 0;
    const double v = std::stod(value, &used);
    return used == value.size() ? std::optional<double>(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

ServerTtftCheck against_records(const std::vector<TtftPair>& ttfts) {
  ServerTtftCheck c;
  c.source = "server records";
  std::vector<double> client, server;
  for (const TtftPair& t : ttfts) {
    if (!t.server) continue;
    client.push_back(ms(t.client));
    server.push_back(ms(*t.server));
  }
  c.requests = static_cast<std::int64_t>(client.size());
  c.client_p50_ms = median_ms(client);
  c.server_p50_ms = median_ms(server);
  c.difference_ms = c.client_p50_ms - c.server_p50_ms;
  c.agrees = std::abs(c.difference_ms) <= kServerTtftToleranceMs;
  c.note = "twinserve serve's own record of each request (arrival to first token on its clock), the same requests";
  if (client.size() < ttfts.size()) {
    c.note += "; " + std::to_string(ttfts.size() - client.size()) + " of " + std::to_string(ttfts.size()) +
              " completed requests came without it and are left out";
  }
  return c;
}

ServerTtftCheck not_compared(std::string why) {
  ServerTtftCheck c;
  c.note = std::move(why);
  return c;
}

ServerTtftCheck against_histogram(const std::vector<TtftPair>& ttfts, const std::string& before_text,
                                  const std::string& after_text) {
  const auto after = parse_prom_histogram(after_text, kTtftHistogram);
  if (!after) {
    return not_compared("the server sends no record of its own and its /metrics has no " +
                        std::string(kTtftHistogram) + " (or could not be read): not compared");
  }
  auto before = parse_prom_histogram(before_text, kTtftHistogram);
  if (!before) before = PromHistogram{after->bounds, std::vector<double>(after->bounds.size(), 0.0)};
  if (before->bounds != after->bounds) {
    return not_compared(std::string(kTtftHistogram) + " changed its buckets during the run: not compared");
  }
  std::vector<double> grown(after->bounds.size());
  for (std::size_t i = 0; i < grown.size(); ++i) grown[i] = after->cumulative[i] - before->cumulative[i];
  const double total = grown.back();
  if (!(total > 0)) return not_compared(std::string(kTtftHistogram) + " did not grow during the run: not compared");

  ServerTtftCheck c;
  c.source = "/metrics histogram";
  std::vector<double> client;
  for (const TtftPair& t : ttfts) client.push_back(ms(t.client));
  c.requests = static_cast<std::int64_t>(client.size());
  c.client_p50_ms = median_ms(client);
  // Prometheus' histogram_quantile: the bucket holding the middle rank,
  // linear within it (the last finite bound when it is +Inf's).
  const double rank = total / 2;
  std::size_t i = 0;
  while (i + 1 < grown.size() && grown[i] < rank) ++i;
  const double low = i == 0 ? 0.0 : after->bounds[i - 1];
  const double below = i == 0 ? 0.0 : grown[i - 1];
  const double high = after->bounds[i];
  const double in_bucket = grown[i] - below;
  const double estimate = std::isinf(high) ? low : low + (high - low) * (in_bucket > 0 ? (rank - below) / in_bucket : 1.0);
  c.server_p50_ms = estimate * 1e3;
  c.server_bucket_low_ms = low * 1e3;
  c.server_bucket_high_ms = high * 1e3;
  c.difference_ms = c.client_p50_ms - c.server_p50_ms;
  c.agrees = c.client_p50_ms >= c.server_bucket_low_ms - kServerTtftToleranceMs &&
             c.client_p50_ms <= c.server_bucket_high_ms + kServerTtftToleranceMs;
  c.note = "the server's " + std::string(kTtftHistogram) +
           " over the run, to the resolution of its buckets (its TTFT counts from when the engine took the request in)";
  const auto counted = static_cast<std::int64_t>(std::llround(total));
  if (counted != c.requests) {
    c.note += "; it counted " + std::to_string(counted) + " requests, the bench completed " +
              std::to_string(c.requests) + " (other clients' or failed requests are in it)";
  }
  return c;
}

}  // namespace

std::optional<PromHistogram> parse_prom_histogram(const std::string& text, const std::string& name) {
  const std::string bucket = name + "_bucket";
  std::map<double, double> sums;  // le -> count, summed over label sets
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(bucket, 0) != 0) continue;
    std::size_t rest = bucket.size();
    std::string labels;
    if (rest < line.size() && line[rest] == '{') {
      const std::size_t close = line.find('}', rest);
      if (close == std::string::npos) continue;
      labels = line.substr(rest + 1, close - rest - 1);
      rest = close + 1;
    }
    if (rest >= line.size() || (line[rest] != ' ' && line[rest] != '\t')) continue;  // a longer metric name
    const auto le = le_of(labels);
    if (!le) continue;
    std::istringstream value(line.substr(rest));
    double count = 0;
    if (!(value >> count) || !std::isfinite(count) || count < 0) continue;
    sums[*le] += count;
  }
  if (sums.empty() || !std::isinf(sums.rbegin()->first)) return std::nullopt;
  PromHistogram h;
  for (const auto& [le, count] : sums) {
    h.bounds.push_back(le);
    h.cumulative.push_back(count);
  }
  return h;
}

ServerTtftCheck check_server_ttft(const std::vector<TtftPair>& ttfts, const std::string& metrics_before,
                                  const std::string& metrics_after) {
  if (ttfts.empty()) return not_compared("no request completed: not compared");
  const bool any_record = std::any_of(ttfts.begin(), ttfts.end(), [](const TtftPair& t) { return t.server.has_value(); });
  if (any_record) return against_records(ttfts);
  return against_histogram(ttfts, metrics_before, metrics_after);
}

nlohmann::ordered_json server_ttft_json(const ServerTtftCheck& c) {
  nlohmann::ordered_json j;
  if (c.source.empty()) {
    j["source"] = nullptr;
    j["agrees"] = nullptr;
    j["note"] = c.note;
    return j;
  }
  j["source"] = c.source;
  j["requests"] = c.requests;
  j["client_p50_ms"] = json_figure(c.client_p50_ms);
  j["server_p50_ms"] = json_figure(c.server_p50_ms);
  if (c.source == "/metrics histogram") {
    j["server_bucket_ms"] = {json_figure(c.server_bucket_low_ms), json_figure(c.server_bucket_high_ms)};
  }
  j["difference_ms"] = json_figure(c.difference_ms);
  j["tolerance_ms"] = json_figure(kServerTtftToleranceMs);
  j["agrees"] = c.agrees;
  j["note"] = c.note;
  return j;
}

std::string server_ttft_warning(const ServerTtftCheck& c) {
  if (c.source.empty() || c.agrees) return "";
  const std::string where = c.source == "server records"
                                ? "the server's own record of the same requests (" + fixed(c.server_p50_ms, 3) + " ms)"
                                : "the server's /metrics median, in its bucket (" + fixed(c.server_bucket_low_ms, 0) +
                                      ", " + fixed(c.server_bucket_high_ms, 0) + "] ms";
  const std::string why = c.difference_ms > 0
                              ? "the client's timing holds delays the server did not see (Nagle's algorithm on a "
                                "connection, a proxy, an overloaded client machine)"
                              : "the client took a chunk before the first token for it";
  return "client TTFT median " + fixed(c.client_p50_ms, 3) + " ms disagrees with " + where + " by " +
         fixed(c.difference_ms, 3) + " ms (tolerance " + fixed(kServerTtftToleranceMs, 0) + " ms): " + why;
}

}  // namespace twin::cli
