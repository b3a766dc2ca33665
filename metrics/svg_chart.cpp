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

std::string svg_chart(const ChartSpec& s) {
  // The legend sits right of the plot, as wide as its longest name needs
  // (about 7 px a character at 12 px), so no label is clipped.
  std::size_t longest = 0;
  for (const auto& series : s.series) longest = std::max(longest, series.name.size());
  const double left = 70, top = 36, bottom = 50, right = 40 + 7.0 * static_cast<double>(longest);
  const double pw = s.width - left - 20, ph = s.height - top - bottom;
  const int total_width = static_cast<int>(std::ceil(left + pw + right));
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  auto usable_y = [&](double y) { return std::isfinite(y) && (!s.log_y || y > 0); };
  for (const auto& series : s.series) {
    for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (!std::isfinite(series.x[i]) || !usable_y(series.y[i])) continue;
      x_lo = std::min(x_lo, series.x[i]);
      x_hi = std::max(x_hi, series.x[i]);
      y_lo = std::min(y_lo, series.y[i]);
      y_hi = std::max(y_hi, series.y[i]);
    }
  }
  for (const auto& l : s.lines) {
    if (!usable_y(l.y)) continue;
    y_lo = std::min(y_lo, l.y);
    y_hi = std::max(y_hi, l.y);
  }
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(total_width) + "\" height=\"" +
                    std::to_string(s.height) + "\" viewBox=\"0 0 " + std::to_string(total_width) + " " +
                    std::to_string(s.height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text x=\"" + num(left) + "\" y=\"20\" font-size=\"14\" font-weight=\"bold\">" + xml_escape(s.title) + "</text>\n";
  if (!std::isfinite(x_lo) || !std::isfinite(y_lo)) {
    out += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(top + ph / 2) + "\" text-anchor=\"middle\">no data</text>\n</svg>\n";
    return out;
  }
  // Linear axes start at 0 for non-negative data (a bar of 2 vs 1 should
  // look twice as tall); a log axis spans whole decades.
  if (x_lo >= 0) x_lo = 0;
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  double ty_lo, ty_hi;
  std::vector<double> yticks;
  if (s.log_y) {
    ty_lo = std::floor(std::log10(y_lo));
    ty_hi = std::ceil(std::log10(y_hi));
    if (ty_hi <= ty_lo) ty_hi = ty_lo + 1;
    for (double e = ty_lo; e <= ty_hi; ++e) yticks.push_back(std::pow(10.0, e));
  } else {
    if (y_lo >= 0) y_lo = 0;
    if (y_hi <= y_lo) y_hi = y_lo + 1;
    y_hi *= 1.05;
    ty_lo = y_lo;
    ty_hi = y_hi;
    yticks = linear_ticks(y_lo, y_hi);
  }
  const auto px = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * pw; };
  const auto py = [&](double y) {
    const double t = s.log_y ? std::log10(y) : y;
    return top + ph - (t - ty_lo) / (ty_hi - ty_lo) * ph;
  };
  // Grid, ticks and labels.
  for (double t : yticks) {
    const double y = py(t);
    out += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(left + pw) + "\" y2=\"" + num(y) +
           "\" stroke=\"#ddd\"/>\n";
    out += "<text x=\"" + num(left - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" + tick_text(t) + "</text>\n";
  }
  for (double t : linear_ticks(x_lo, x_hi)) {
    const double x = px(t);
    out += "<line x1=\"" + num(x) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x) + "\" y2=\"" + num(top + ph) +
           "\" stroke=\"#eee\"/>\n";
    out += "<text x=\"" + num(x) + "\" y=\"" + num(top + ph + 16) + "\" text-anchor=\"middle\">" + tick_text(t) + "</text>\n";
  }
  out += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
         "\" fill=\"none\" stroke=\"#333\"/>\n";
  out += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(s.height - 10.0) + "\" text-anchor=\"middle\">" +
         xml_escape(s.x_label) + "</text>\n";
  out += "<text transform=\"translate(16," + num(top + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         xml_escape(s.y_label) + (s.log_y ? " (log)" : "") + "</text>\n";
  // Reference lines.
  for (const auto& l : s.lines) {
    if (!usable_y(l.y)) continue;
    const double y = py(l.y);
    out += "<line class=\"slo\" x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(left + pw) + "\" y2=\"" +
           num(y) + "\" stroke=\"#c00\" stroke-dasharray=\"6,4\"/>\n";
    // A white outline under the letters keeps the label readable where a
    // curve crosses it.
    out += "<text x=\"" + num(left + pw - 4) + "\" y=\"" + num(y - 4) +
           "\" text-anchor=\"end\" fill=\"#c00\" stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">" +
           xml_escape(l.label) + "</text>\n";
  }
  // Series, then the legend.
  std::size_t palette_next = 0;
  for (std::size_t k = 0; k < s.series.size(); ++k) {
    const ChartSeries& series = s.series[k];
    const std::size_t slot = series.color.empty() ? palette_next++ : 0;
    const std::string color = !series.color.empty() ? xml_escape(series.color) : kColors[slot % std::size(kColors)];
    const std::size_t cycle = (slot / std::size(kColors)) % std::size(kDashes);
    const double width = series.emphasized ? 4 : 2;
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (std::isfinite(series.x[i]) && usable_y(series.y[i])) pts.emplace_back(px(series.x[i]), py(series.y[i]));
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
    const double ly = top + 14 + 18.0 * static_cast<double>(k);
    if (cycle == 0) {
      out += "<rect x=\"" + num(left + pw + 12) + "\" y=\"" + num(ly - 9) + "\" width=\"12\" height=\"12\" fill=\"" +
             color + "\"/>\n";
    } else {  // the line's dashes and the points' shape, as drawn
      out += "<line x1=\"" + num(left + pw + 8) + "\" y1=\"" + num(ly - 3) + "\" x2=\"" + num(left + pw + 28) +
             "\" y2=\"" + num(ly - 3) + "\" stroke=\"" + color + "\" stroke-width=\"2\" stroke-dasharray=\"" +
             kDashes[cycle] + "\"/>\n";
      out += marker(left + pw + 18, ly - 3, cycle, color, 4);
    }
    out += "<text x=\"" + num(left + pw + 30) + "\" y=\"" + num(ly + 1) + "\"" +
           (series.emphasized ? " font-weight=\"bold\">" : ">") + xml_escape(series.name) +
           (series.emphasized ? " (chosen)" : "") + "</text>\n";
  }
  out += "</svg>\n";
  return out;
}

}  // namespace twin
