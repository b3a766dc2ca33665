// validate's report.html on a made-up result: one chart per figure with the
// measurement and each cost model across the loads, the error table, nothing
// to fetch, the same bytes for the same result. (Rendered in a browser by
// tests/report_render.)
#include <catch2/catch.hpp>

#include <string>

#include "validate/report.hpp"

namespace twin::test {
namespace {

// The comparisons compare_summaries makes, with made-up figures: measured
// grows with the load, calibrated is 10% high, roofline 20% low.
std::vector<MetricComparison> comparisons(double load, double factor) {
  std::vector<MetricComparison> out;
  for (const char* metric : {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"}) {
    for (const char* stat : {"p50", "p90", "p99"}) {
      const double measured = 10 * load * (stat[1] == '5' ? 1 : 2);
      out.push_back({metric, stat, measured, measured * factor, (factor - 1) * 100});
    }
  }
  const double tput = 1000 * load;
  out.push_back({"output_throughput", "value", tput, tput * factor, (factor - 1) * 100});
  return out;
}

ValidationResult made_up(bool repeats) {
  ValidationResult r;
  r.model = "tiny";
  r.profile = "tiny-cpu.json";
  r.trace = "chat <1>.jsonl";  // escaped on the page
  r.requests = 100;
  r.trace_rate_rps = 5;
  r.capacity_rps = 20;
  r.engine_description = "cpu backend, 1 thread";
  r.roofline_hardware = "cpu";
  for (double load : {0.3, 0.6, 0.9}) {
    LoadResult l;
    l.load = load;
    l.rate_rps = load * r.capacity_rps;
    l.folder = "load_" + std::to_string(load).substr(0, 4);
    l.parity.requests = 100;
    ModelResult cal, roof;
    cal.name = "calibrated";
    cal.metrics = comparisons(load, 1.1);
    roof.name = "roofline";
    roof.metrics = comparisons(load, 0.8);
    l.models.push_back(std::move(cal));
    l.models.push_back(std::move(roof));
    if (repeats) l.engine_repeats.push_back(comparisons(load, 1.03));
    r.loads.push_back(std::move(l));
  }
  return r;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("report.html: a chart per figure of measured and each model across loads, and the error table") {
  const ValidationResult r = made_up(false);
  const std::string html = report_html(r);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  // TTFT, TPOT and E2E latency at p50 and p90, then output throughput.
  CHECK(count(html, "<svg") == 7);
  CHECK(count(html, "</svg>") == 7);
  for (const char* title : {"TTFT p50", "TTFT p90", "TPOT p50", "TPOT p90", "E2E latency p50", "E2E latency p90",
                            "Output throughput"}) {
    INFO(title);
    CHECK(count(html, std::string(">") + title + ": predicted and measured</text>") == 1);
  }
  // Three lines in each (measured, calibrated, roofline), each through the
  // three loads, named in each legend.
  CHECK(count(html, "class=\"series\"") == 21);
  CHECK(count(html, "<circle") == 63);
  CHECK(count(html, ">measured (engine)</text>") == 7);
  CHECK(count(html, ">calibrated</text>") == 7);
  CHECK(count(html, ">roofline</text>") == 7);
  CHECK(count(html, ">offered load (req/s)</text>") == 7);
  // The error table: every figure of every load, each model's error.
  const std::string table = html.substr(html.find("<table class=\"errors\">"));
  CHECK(count(table, "<tr>") == 1 + 3 * 13);
  CHECK(count(table, "<td>+10.0%</td>") == 3 * 13);
  CHECK(count(table, "<td>-20.0%</td>") == 3 * 13);
  CHECK(table.find("<th>noise</th>") == std::string::npos);
  CHECK(html.find("chat &lt;1&gt;.jsonl") != std::string::npos);
  CHECK(html.find("exact at every load") != std::string::npos);
  // Nothing to fetch: no scripts, links, external images or fonts.
  for (const char* banned : {"<script", "href=", "src=", "url(", "@import"}) {
    INFO(banned);
    CHECK(html.find(banned) == std::string::npos);
  }
  CHECK(report_html(r) == html);  // same result, same bytes
}

TEST_CASE("report.html: with engine repeats the error table has the machine's noise") {
  const std::string html = report_html(made_up(true));
  CHECK(html.find("<th>noise</th>") != std::string::npos);
  CHECK(count(html, "<td>&#177;3.0%</td>") == 3 * 13);
}

}  // namespace
}  // namespace twin::test
