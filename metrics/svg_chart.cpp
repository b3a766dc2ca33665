#include "metrics/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace twin {
namespace {

// Colour-blind-safe palette (Okabe and Ito, without its yellow, which is
// hard to see on white, and black, which marks fronts), cycled.
const char* const kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C564B", "#7F7F7F"};
// Past the palette, each further cycle changes the line's dashes and the
// points' shape, so 24 series stay told apart (a plan may draw 18).
const char* const kDashes[] = {"", "7,4", "2,3"};

// A point marker of cycle `cycle`: circle, square, triangle.
std::string marker(double x, double y, std::size_t cycle, const std::string& color, double r) {
  char buf[256];
  switch (cycle % 3) {
    case 1:
      std::snprintf(buf, sizeof buf, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n",
                    x - r, y - r, 2 * r, 2 * r, color.c_str());
      return buf;
    case 2:
      std::snprintf(buf, sizeof buf, "<polygon points=\"%.2f,%.2f %.2f,%.2f %.2f,%.2f\" fill=\"%s\"/>\n", x, y - r - 1,
                    x - r - 1, y + r, x + r + 1, y + r, color.c_str());
      return buf;
    default:
      std::snprintf(buf, sizeof buf, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"%s\"/>\n", x, y, r, color.c_str());
      return buf;
  }
}

std::string num(double v, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// A tick label: few digits, no trailing zeros, and thousands and millions
// as k and M (20k, not 2e+04), so a label stays within the left margin and
// clear of the axis title.
std::string tick_text(double v) {
  char buf[64];
  if (std::abs(v) >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.4gM", v / 1e6);
  } else if (std::abs(v) >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.4gk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

// Round ticks covering [lo, hi]: steps of 1, 2 or 5 x 10^k.
std::vector<double> linear_ticks(double lo, double hi) {
  const double span = hi - lo;
  const double raw = span / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return out;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

bool usable_y(const ChartSpec& s, double y) { return std::isfinite(y) && (!s.log_y || y > 0); }

// Where the plot sits and how data maps onto it.
struct Frame {
  double left = 70, top = 36, pw = 0, ph = 0;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  double ty_lo = 0, ty_hi = 0;  // the y axis's ends (decades on a log axis)
  bool log_y = false;
  std::vector<double> yticks;
  double px(double x) const { return left + (x - x_lo) / (x_hi - x_lo) * pw; }
  double py(double y) const {
    const double t = log_y ? std::log10(y) : y;
    return top + ph - (t - ty_lo) / (ty_hi - ty_lo) * ph;
  }
};

// The data's extent over every series and reference line.
void data_range(const ChartSpec& s, Frame& f) {
  for (const auto& series : s.series) {
    for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (!std::isfinite(series.x[i]) || !usable_y(s, series.y[i])) continue;
      f.x_lo = std::min(f.x_lo, series.x[i]);
      f.x_hi = std::max(f.x_hi, series.x[i]);
      f.y_lo = std::min(f.y_lo, series.y[i]);
      f.y_hi = std::max(f.y_hi, series.y[i]);
    }
  }
  for (const auto& l : s.lines) {
    if (!usable_y(s, l.y)) continue;
    f.y_lo = std::min(f.y_lo, l.y);
    f.y_hi = std::max(f.y_hi, l.y);
  }
}

// Linear axes start at 0 for non-negative data (a bar of 2 vs 1 should
// look twice as tall); a log axis spans whole decades.
void fit_axes(Frame& f) {
  if (f.x_lo >= 0) f.x_lo = 0;
  if (f.x_hi <= f.x_lo) f.x_hi = f.x_lo + 1;
  if (f.log_y) {
    f.ty_lo = std::floor(std::log10(f.y_lo));
    f.ty_hi = std::ceil(std::log10(f.y_hi));
    if (f.ty_hi <= f.ty_lo) f.ty_hi = f.ty_lo + 1;
    for (double e = f.ty_lo; e <= f.ty_hi; ++e) f.yticks.push_back(std::pow(10.0, e));
  } else {
    if (f.y_lo >= 0) f.y_lo = 0;
    if (f.y_hi <= f.y_lo) f.y_hi = f.y_lo + 1;
    f.y_hi *= 1.05;
    f.ty_lo = f.y_lo;
    f.ty_hi = f.y_hi;
    f.yticks = linear_ticks(f.y_lo, f.y_hi);
  }
}

// Grid, ticks, labels, the plot's frame and the axis titles.
void draw_axes(std::string& out, const ChartSpec& s, const Frame& f) {
  for (double t : f.yticks) {
    const double y = f.py(t);
    out += "<line x1=\"" + num(f.left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(f.left + f.pw) + "\" y2=\"" + num(y) +
           "\" stroke=\"#ddd\"/>\n";
    out += "<text x=\"" + num(f.left - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" + tick_text(t) + "</text>\n";
  }
  for (double t : linear_ticks(f.x_lo, f.x_hi)) {
    const double x = f.px(t);
    out += "<line x1=\"" + num(x) + "\" y1=\"" + num(f.top) + "\" x2=\"" + num(x) + "\" y2=\"" + num(f.top + f.ph) +
           "\" stroke=\"#eee\"/>\n";
    out += "<text x=\"" + num(x) + "\" y=\"" + num(f.top + f.ph + 16) + "\" text-anchor=\"middle\">" + tick_text(t) +
           "</text>\n";
  }
  out += "<rect x=\"" + num(f.left) + "\" y=\"" + num(f.top) + "\" width=\"" + num(f.pw) + "\" height=\"" + num(f.ph) +
         "\" fill=\"none\" stroke=\"#333\"/>\n";
  out += "<text x=\"" + num(f.left + f.pw / 2) + "\" y=\"" + num(s.height - 10.0) + "\" text-anchor=\"middle\">" +
         xml_escape(s.x_label) + "</text>\n";
  out += "<text transform=\"translate(16," + num(f.top + f.ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         xml_escape(s.y_label) + (s.log_y ? " (log)" : "") + "</text>\n";
}

void draw_reference_lines(std::string& out, const ChartSpec& s, const Frame& f) {
  for (const auto& l : s.lines) {
    if (!usable_y(s, l.y)) continue;
    const double y = f.py(l.y);
    out += "<line class=\"slo\" x1=\"" + num(f.left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(f.left + f.pw) +
           "\" y2=\"" + num(y) + "\" stroke=\"#c00\" stroke-dasharray=\"6,4\"/>\n";
    // A white outline under the letters keeps the label readable where a
    // curve crosses it.
    out += "<text x=\"" + num(f.left + f.pw - 4) + "\" y=\"" + num(y - 4) +
           "\" text-anchor=\"end\" fill=\"#c00\" stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">" +
           xml_escape(l.label) + "</text>\n";
  }
}

// Series k's legend entry: a swatch (or its dashes and marker), its name.
void draw_legend_entry(std::string& out, const ChartSeries& series, std::size_t k, std::size_t cycle,
                       const std::string& color, const Frame& f) {
  const double ly = f.top + 14 + 18.0 * static_cast<double>(k);
  if (cycle == 0) {
    out += "<rect x=\"" + num(f.left + f.pw + 12) + "\" y=\"" + num(ly - 9) + "\" width=\"12\" height=\"12\" fill=\"" +
           color + "\"/>\n";
  } else {  // the line's dashes and the points' shape, as drawn
    out += "<line x1=\"" + num(f.left + f.pw + 8) + "\" y1=\"" + num(ly - 3) + "\" x2=\"" + num(f.left + f.pw + 28) +
           "\" y2=\"" + num(ly - 3) + "\" stroke=\"" + color + "\" stroke-width=\"2\" stroke-dasharray=\"" +
           kDashes[cycle] + "\"/>\n";
    out += marker(f.left + f.pw + 18, ly - 3, cycle, color, 4);
  }
  out += "<text x=\"" + num(f.left + f.pw + 30) + "\" y=\"" + num(ly + 1) + "\"" +
         (series.emphasized ? " font-weight=\"bold\">" : ">") + xml_escape(series.name) +
         (series.emphasized ? " (chosen)" : "") + "</text>\n";
}

void draw_series(std::string& out, const ChartSpec& s, const Frame& f) {
  std::size_t palette_next = 0;
  for (std::size_t k = 0; k < s.series.size(); ++k) {
    const ChartSeries& series = s.series[k];
    const std::size_t slot = series.color.empty() ? palette_next++ : 0;
    const std::string color = !series.color.empty() ? xml_escape(series.color) : kColors[slot % std::size(kColors)];
    const std::size_t cycle = (slot / std::size(kColors)) % std::size(kDashes);
    const double width = series.emphasized ? 4 : 2;
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (std::isfinite(series.x[i]) && usable_y(s, series.y[i])) pts.emplace_back(f.px(series.x[i]), f.py(series.y[i]));
    }
    if (series.lines && pts.size() > 1) {
      out += "<polyline class=\"series\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" + num(width, 0) + "\"" +
             (*kDashes[cycle] ? std::string(" stroke-dasharray=\"") + kDashes[cycle] + "\"" : std::string()) + " points=\"";
      for (std::size_t i = 0; i < pts.size(); ++i) {
        if (i > 0) out += ' ';
        out += num(pts[i].first);
        out += ',';
        out += num(pts[i].second);
      }
      out += "\"/>\n";
    }
    for (const auto& [x, y] : pts) {
      out += marker(x, y, cycle, color, series.emphasized ? 4.5 : 3);
    }
    draw_legend_entry(out, series, k, cycle, color, f);
  }
}

}  // namespace

std::string svg_chart(const ChartSpec& s) {
  // The legend sits right of the plot, as wide as its longest name needs
  // (about 7 px a character at 12 px), so no label is clipped.
  std::size_t longest = 0;
  for (const auto& series : s.series) longest = std::max(longest, series.name.size());
  Frame f;
  const double bottom = 50, right = 40 + 7.0 * static_cast<double>(longest);
  f.pw = s.width - f.left - 20;
  f.ph = s.height - f.top - bottom;
  f.log_y = s.log_y;
  const int total_width = static_cast<int>(std::ceil(f.left + f.pw + right));
  data_range(s, f);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(total_width) + "\" height=\"" +
                    std::to_string(s.height) + "\" viewBox=\"0 0 " + std::to_string(total_width) + " " +
                    std::to_string(s.height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text x=\"" + num(f.left) + "\" y=\"20\" font-size=\"14\" font-weight=\"bold\">" + xml_escape(s.title) + "</text>\n";
  if (!std::isfinite(f.x_lo) || !std::isfinite(f.y_lo)) {
    out += "<text x=\"" + num(f.left + f.pw / 2) + "\" y=\"" + num(f.top + f.ph / 2) +
           "\" text-anchor=\"middle\">no data</text>\n</svg>\n";
    return out;
  }
  fit_axes(f);
  draw_axes(out, s, f);
  draw_reference_lines(out, s, f);
  draw_series(out, s, f);
  out += "</svg>\n";
  return out;
}

}  // namespace twin
