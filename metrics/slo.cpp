#include "metrics/slo.hpp"

#include <array>
#include <charconv>
#include <cctype>
#include <cmath>
#include <string>

#include "base/error.hpp"

namespace twin {
namespace {

constexpr std::array<std::pair<std::string_view, Metric>, 4> kMetrics = {{
    {"ttft", Metric::ttft}, {"tpot", Metric::tpot}, {"itl", Metric::itl}, {"e2el", Metric::e2el}}};

constexpr std::string_view kExample = "e.g. ttft_p90<=2s,tpot_p99<=100ms,e2el<=10s";

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// A part of the user's text inside a message: quoted and cut short.
std::string quote(std::string_view text) {
  std::string out(1, '"');
  out += excerpt(text, 80);
  out += '"';
  return out;
}

[[noreturn]] void fail(std::string_view part, const std::string& what) {
  throw UsageError("SLO " + quote(part) + ": " + what + " (" + std::string(kExample) + ")");
}

std::size_t digits(std::string_view text, std::size_t at) {
  std::size_t n = 0;
  while (at + n < text.size() && text[at + n] >= '0' && text[at + n] <= '9') ++n;
  return n;
}

// Parses all of `text` as a finite number written DIGITS[.DIGITS], and with
// `exponent` also [e|E[+|-]DIGITS]; false otherwise. from_chars alone would
// take "50." and "1e1" as a percentile: a typo read as a number.
bool parse_number(std::string_view text, double& value, bool exponent) {
  std::size_t at = digits(text, 0);
  if (at == 0) return false;
  if (at < text.size() && text[at] == '.') {
    const std::size_t frac = digits(text, at + 1);
    if (frac == 0) return false;
    at += 1 + frac;
  }
  if (exponent && at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    std::size_t sign = at + 1 < text.size() && (text[at + 1] == '+' || text[at + 1] == '-') ? 1 : 0;
    const std::size_t exp = digits(text, at + 1 + sign);
    if (exp == 0) return false;
    at += 1 + sign + exp;
  }
  if (at != text.size()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && std::isfinite(value);
}

// The shortest text that reads back to `value`; `fixed` never uses an
// exponent (a percentile is written as parse_one reads it).
std::string shortest(double value, bool fixed = false) {
  std::array<char, 400> buffer{};
  const auto [end, ec] = fixed ? std::to_chars(buffer.data(), buffer.data() + buffer.size(), value,
                                               std::chars_format::fixed)
                               : std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return std::string(buffer.data(), ec == std::errc() ? end : buffer.data());
}

Slo parse_one(std::string_view part) {
  Slo slo;
  const auto le = part.find("<=");
  if (le == std::string_view::npos) {
    fail(part, "expected METRIC[_pN]<=VALUE UNIT with \"<=\"");
  }
  const std::string_view lhs = trim(part.substr(0, le));
  const std::string_view rhs = trim(part.substr(le + 2));

  const auto underscore = lhs.find('_');
  const std::string_view name = lhs.substr(0, underscore);
  bool known = false;
  for (const auto& [known_name, metric] : kMetrics) {
    if (name == known_name) {
      slo.metric = metric;
      known = true;
    }
  }
  if (!known) {
    fail(part, "unknown metric " + quote(name) + "; known: ttft, tpot, itl, e2el");
  }
  if (underscore != std::string_view::npos) {
    const std::string_view suffix = lhs.substr(underscore + 1);
    double p = 0;
    if (suffix.size() < 2 || suffix.front() != 'p' || !parse_number(suffix.substr(1), p, false) || p <= 0 ||
        p > 100) {
      fail(part, "bad percentile " + quote(suffix) + "; expected p followed by a number in (0, 100], e.g. p90 or p99.9");
    }
    slo.percentile = p;
  }

  std::size_t unit_at = rhs.size();
  while (unit_at > 0 && std::isalpha(static_cast<unsigned char>(rhs[unit_at - 1]))) --unit_at;
  const std::string_view number = trim(rhs.substr(0, unit_at));
  const std::string_view unit = rhs.substr(unit_at);
  double value = 0;
  if (!parse_number(number, value, true) || value <= 0) {
    fail(part, "bad threshold " + quote(number) + "; expected a positive number");
  }
  if (unit == "s") {
    slo.threshold_ms = value * 1e3;
  } else if (unit == "ms") {
    slo.threshold_ms = value;
  } else if (unit == "us") {
    slo.threshold_ms = value * 1e-3;
  } else {
    fail(part, unit.empty() ? std::string("missing unit; expected s, ms or us")
                            : "unknown unit " + quote(unit) + "; expected s, ms or us");
  }
  if (!std::isfinite(slo.threshold_ms)) fail(part, "threshold " + quote(number) + " is too large");
  return slo;
}

}  // namespace

std::vector<Slo> parse_slos(std::string_view text) {
  std::vector<Slo> slos;
  if (trim(text).empty()) return slos;
  std::size_t index = 0;
  while (true) {
    ++index;
    const auto comma = text.find(',');
    const std::string_view part = trim(text.substr(0, comma));
    if (part.empty()) {
      throw UsageError("SLO list: part " + std::to_string(index) + " is empty; expected METRIC[_pN]<=VALUE UNIT (" +
                       std::string(kExample) + ")");
    }
    slos.push_back(parse_one(part));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return slos;
}

std::string_view metric_name(Metric metric) {
  for (const auto& [name, known] : kMetrics) {
    if (known == metric) return name;
  }
  return "?";
}

std::string format_slo(const Slo& slo) {
  std::string text(metric_name(slo.metric));
  if (slo.percentile > 0) text += "_p" + shortest(slo.percentile, true);
  return text + "<=" + shortest(slo.threshold_ms) + "ms";
}

std::string format_slos(const std::vector<Slo>& slos) {
  std::string text;
  for (const auto& slo : slos) {
    if (!text.empty()) text += ',';
    text += format_slo(slo);
  }
  return text;
}

}  // namespace twin
