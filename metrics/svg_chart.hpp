#pragma once
// A small SVG line/scatter chart for the HTML reports (plan.html and
// validate's report.html: here, below both planner and validate): axes with
// round ticks (linear, or log10 for latencies spanning decades), named
// series drawn as lines or points, horizontal reference lines (SLO thresholds) and
// a legend. Self-contained text: no fonts, scripts or links to fetch.
// Numbers are printed with fixed decimals, so the same data gives the same
// bytes.
#include <string>
#include <vector>

namespace twin {

struct ChartSeries {
  std::string name;
  std::vector<double> x, y;  // same length; non-finite points are skipped
  bool lines = true;         // false: points only
  // Empty: the next palette colour, counted over the series without one, so
  // a named series (e.g. a Pareto front in black) leaves the others the
  // colours they have in the page's other charts.
  std::string color;
  // Drawn thicker and named "(chosen)" in the legend: the one the page is about.
  bool emphasized = false;
};

struct ChartLine {  // y = value across the plot, labelled
  std::string label;
  double y = 0;
};

struct ChartSpec {
  std::string title, x_label, y_label;
  bool log_y = false;
  std::vector<ChartSeries> series;
  std::vector<ChartLine> lines;
  int width = 600, height = 420;  // the plot and its axes; the legend widens it
};

// The chart as an <svg> element. Without a finite point it says "no data".
std::string svg_chart(const ChartSpec& spec);

// Text safe inside HTML/SVG (&, <, >, ").
std::string xml_escape(const std::string& text);

}  // namespace twin
