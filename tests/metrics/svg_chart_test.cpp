// The reports' SVG charts: linear axes from 0, short tick labels, escaped
// text, reference lines, "no data", the same bytes for the same chart.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "metrics/svg_chart.hpp"

namespace twin {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("svg chart: axes from 0, thousands as k, a line per series, the reference line, escaped names") {
  ChartSpec spec;
  spec.title = "throughput <tokens/s>";
  spec.x_label = "load";
  spec.y_label = "tokens/s";
  ChartSeries line, points;
  line.name = "a & b";
  line.x = {100, 200, 300};
  line.y = {12000, 15000, 21000};
  points.name = "points";
  points.x = {150, 250};
  points.y = {13000, 16000};
  points.lines = false;
  points.color = "#000000";
  spec.series.push_back(line);
  spec.series.push_back(points);
  spec.lines.push_back({"SLO", 18000});
  const std::string svg = svg_chart(spec);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(count(svg, "</svg>") == 1);
  CHECK(count(svg, "class=\"series\"") == 1);  // the second series is points only
  CHECK(count(svg, "<circle") == 5);
  CHECK(count(svg, "class=\"slo\"") == 1);
  CHECK(svg.find(">0</text>") != std::string::npos);    // both axes start at 0
  CHECK(svg.find(">20k</text>") != std::string::npos);  // not 2e+04
  CHECK(svg.find("e+0") == std::string::npos);
  CHECK(svg.find("throughput &lt;tokens/s&gt;") != std::string::npos);
  CHECK(svg.find(">a &amp; b</text>") != std::string::npos);
  // A series with its own colour leaves the palette to the others.
  CHECK(count(svg, "fill=\"#000000\"") == 3);  // its two points and legend box
  CHECK(count(svg, "stroke=\"#0072B2\"") == 1);
  CHECK(svg_chart(spec) == svg);
}

TEST_CASE("svg chart: past the palette a series changes dashes and marker - the chosen one is marked") {
  ChartSpec spec;
  spec.title = "eighteen candidates";
  spec.x_label = "load";
  spec.y_label = "latency";
  for (int k = 0; k < 18; ++k) {
    ChartSeries s;
    s.name = std::string("c").append(std::to_string(k));
    s.x = {1, 2};
    s.y = {1.0 + k, 2.0 + k};
    s.emphasized = k == 12;
    spec.series.push_back(s);
  }
  const std::string svg = svg_chart(spec);
  // 8 colours: series 0-7 solid with circles, 8-15 dashed with squares,
  // 16-17 dotted with triangles (legend samples included).
  CHECK(count(svg, "<circle") == 16);
  CHECK(count(svg, "stroke-dasharray=\"7,4\"") == 16);
  CHECK(count(svg, "stroke-dasharray=\"2,3\"") == 4);
  CHECK(count(svg, "<polygon") == 6);
  CHECK(count(svg, "stroke-width=\"4\"") == 1);
  CHECK(svg.find(">c12 (chosen)</text>") != std::string::npos);
}

TEST_CASE("svg chart: a chart without a finite point says no data") {
  ChartSpec spec;
  spec.title = "empty";
  ChartSeries nan;
  nan.name = "nan";
  nan.x = {1};
  nan.y = {std::nan("")};
  spec.series.push_back(nan);
  CHECK(svg_chart(spec).find(">no data</text>") != std::string::npos);
}

}  // namespace
}  // namespace twin
