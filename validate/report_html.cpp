#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "metrics/html_page.hpp"
#include "metrics/svg_chart.hpp"
#include "validate/report.hpp"
#include "validate/report_numbers.hpp"

namespace twin {
namespace {

std::string fixed(double v, int decimals = 3) { return fixed_or(v, decimals, "-"); }

std::string signed_pct(double v) { return signed_pct_or(v, "-"); }

// The charted figures, in the order of the page: what a user reads first.
struct Charted {
  const char* metric;
  const char* stat;
  const char* title;
  const char* unit;
};
constexpr Charted kCharted[] = {
    {"ttft_ms", "p50", "TTFT p50", "ms"},          {"ttft_ms", "p90", "TTFT p90", "ms"},
    {"tpot_ms", "p50", "TPOT p50", "ms"},          {"tpot_ms", "p90", "TPOT p90", "ms"},
    {"e2el_ms", "p50", "E2E latency p50", "ms"},   {"e2el_ms", "p90", "E2E latency p90", "ms"},
    {"output_throughput", "value", "Output throughput", "tokens/s"},
};

// Index of (metric, stat) in a model's comparisons; npos when absent.
std::size_t find_metric(const std::vector<MetricComparison>& metrics, const std::string& metric, const std::string& stat) {
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    if (metrics[i].metric == metric && metrics[i].stat == stat) return i;
  }
  return std::string::npos;
}

// Model names in the order of the first load that has each (calibrated,
// roofline, ...): one series per cost model across every load.
std::vector<std::string> model_names(const ValidationResult& r) {
  std::vector<std::string> names;
  for (const LoadResult& l : r.loads) {
    for (const ModelResult& m : l.models) {
      if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
    }
  }
  return names;
}

// Measured and every model's prediction of one figure against the offered
// load (req/s), one point per load.
ChartSpec metric_chart(const ValidationResult& r, const Charted& c) {
  ChartSpec spec;
  spec.width = 420;  // two charts side by side on a page 1240 px wide
  spec.height = 330;
  spec.title = std::string(c.title) + ": predicted and measured";
  spec.x_label = "offered load (req/s)";
  spec.y_label = std::string(c.title) + " (" + c.unit + ")";
  ChartSeries measured;
  measured.name = "measured (engine)";
  for (const LoadResult& l : r.loads) {
    if (l.models.empty()) continue;
    const std::size_t i = find_metric(l.models.front().metrics, c.metric, c.stat);
    if (i == std::string::npos) continue;
    measured.x.push_back(l.rate_rps);
    measured.y.push_back(l.models.front().metrics[i].measured);
  }
  spec.series.push_back(std::move(measured));
  for (const std::string& name : model_names(r)) {
    ChartSeries series;
    series.name = name;
    for (const LoadResult& l : r.loads) {
      for (const ModelResult& m : l.models) {
        if (m.name != name) continue;
        const std::size_t i = find_metric(m.metrics, c.metric, c.stat);
        if (i == std::string::npos) continue;
        series.x.push_back(l.rate_rps);
        series.y.push_back(m.metrics[i].predicted);
      }
    }
    spec.series.push_back(std::move(series));
  }
  return spec;
}

std::string parity_cell(const LoadResult& l) {
  if (!l.parity_error.empty()) return "FAILED: " + l.parity_error;
  if (l.parity.exact()) return "exact (" + std::to_string(l.parity.requests) + " requests)";
  return "FAILED: " + std::to_string(l.parity.mismatched) + " requests differ, max " + std::to_string(l.parity.max_abs_ns) +
         " ns";
}

// Every figure of every load: measured, then each model's prediction and
// error; with --engine-repeats, the engine's own largest difference.
std::string error_table(const ValidationResult& r) {
  const std::vector<std::string> names = model_names(r);
  const bool noise = !r.loads.empty() && !r.loads.front().engine_repeats.empty();
  std::string out = "<table class=\"errors\">\n<tr><th>load</th><th>req/s</th><th>metric</th><th>measured</th>";
  for (const std::string& n : names) out += "<th>" + xml_escape(n) + "</th><th>error</th>";
  if (noise) out += "<th>noise</th>";
  out += "</tr>\n";
  for (const LoadResult& l : r.loads) {
    if (l.models.empty()) continue;
    const std::vector<MetricComparison>& base = l.models.front().metrics;
    for (std::size_t i = 0; i < base.size(); ++i) {
      out += "<tr><td>" + fixed(l.load, 2) + "</td><td>" + fixed(l.rate_rps) + "</td><td>" + xml_escape(base[i].metric) +
             (base[i].stat == "value" ? "" : " " + xml_escape(base[i].stat)) + "</td><td>" + fixed(base[i].measured) + "</td>";
      for (const std::string& n : names) {
        const ModelResult* m = nullptr;
        for (const ModelResult& x : l.models) {
          if (x.name == n) m = &x;
        }
        const std::size_t k = m ? find_metric(m->metrics, base[i].metric, base[i].stat) : std::string::npos;
        if (k == std::string::npos) {
          out += "<td>-</td><td>-</td>";
        } else {
          out += "<td>" + fixed(m->metrics[k].predicted) + "</td><td>" + signed_pct(m->metrics[k].error_pct) + "</td>";
        }
      }
      if (noise) {
        double worst = 0;
        for (const auto& repeat : l.engine_repeats) {
          if (i < repeat.size() && std::isfinite(repeat[i].error_pct)) worst = std::max(worst, std::abs(repeat[i].error_pct));
        }
        out += "<td>&#177;" + fixed(worst, 1) + "%</td>";
      }
      out += "</tr>\n";
    }
  }
  return out + "</table>\n";
}

}  // namespace

std::string report_html(const ValidationResult& r) {
  std::string out = html_page_head("twinserve validate", 1240,
                                   "td:nth-child(3),th:nth-child(3){text-align:left}\n"
                                   "table.loads td:last-child{text-align:left}\n"
                                   ".charts svg{margin:0 12px 12px 0}\n") +
                    "<h1>Validation: " + xml_escape(r.model) + "</h1>\n";
  out += "<p>Trace <code>" + xml_escape(r.trace) + "</code>, " + std::to_string(r.requests) + " requests (" +
         fixed(r.trace_rate_rps) + " req/s as recorded). Calibrated profile <code>" + xml_escape(r.profile) +
         "</code>. Engine: " + xml_escape(r.engine_description) + ". Roofline priced with hardware profile <code>" +
         xml_escape(r.roofline_hardware) + "</code>.</p>\n";
  if (const std::string caveat = r.roofline_caveat(); !caveat.empty()) {
    out += "<p><b>Note:</b> " + xml_escape(caveat) + ".</p>\n";
  }
  out += "<p>Predicted capacity (calibrated model, every request at t=0): <b>" + fixed(r.capacity_rps) +
         " req/s</b>. Replay parity: <b>" + (r.parity_exact() ? "exact at every load" : "FAILED") + "</b>.</p>\n";
  out += "<table class=\"loads\">\n<tr><th>load</th><th>req/s</th><th>folder</th><th>replay parity</th></tr>\n";
  for (const LoadResult& l : r.loads) {
    out += "<tr><td>" + fixed(l.load, 2) + "</td><td>" + fixed(l.rate_rps) + "</td><td>" + xml_escape(l.folder) +
           "/</td><td>" + xml_escape(parity_cell(l)) + "</td></tr>\n";
  }
  out += "</table>\n";
  out += "<h2>Predicted against measured across loads</h2>\n<p>One chart per figure: the engine's measurement "
         "and each cost model's prediction of the same requests at each load. The replay reproduces the engine "
         "exactly, so the gap between a prediction and the measurement is its cost model's error.</p>\n"
         "<div class=\"charts\">\n";
  for (const Charted& c : kCharted) out += svg_chart(metric_chart(r, c));
  out += "</div>\n<h2>Errors</h2>\n<p>(predicted &#8722; measured) / measured";
  if (!r.loads.empty() && !r.loads.front().engine_repeats.empty()) {
    out += "; measured is each metric's median over the engine runs, and noise the largest difference of a run "
           "from run 1 (no prediction error can be checked more finely)";
  }
  out += ". report.md has the per-request, step-time and per-op tables.</p>\n" + error_table(r);
  out += "<p>Written by <code>twinserve validate</code>; the data is in report.json beside this page.</p>\n</body>\n</html>\n";
  return out;
}

}  // namespace twin
