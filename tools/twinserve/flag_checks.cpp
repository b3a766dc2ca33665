#include "tools/twinserve/flag_checks.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

#include "base/error.hpp"
#include "sim/cluster_config.hpp"

namespace twin::cli {
namespace {

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace

CLI::Validator int_range(std::int64_t lo, std::int64_t hi) {
  const std::string expected = "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, expected](std::string& text) -> std::string {
        std::int64_t v = 0;
        const char* end = text.data() + text.size();
        const char* begin = text.data() + (text.size() > 1 && text[0] == '+');  // "+8" as CLI11 reads it
        const auto [ptr, ec] = std::from_chars(begin, end, v);
        if (text.empty() || ec != std::errc{} || ptr != end || v < lo || v > hi)
          return expected + ", got '" + excerpt(text, 40) + "'";
        return {};
      },
      "INT in [" + std::to_string(lo) + " - " + std::to_string(hi) + "]");
}

CLI::Validator max_model_len_value(std::int64_t lo, std::int64_t hi) {
  CLI::Validator range = int_range(lo, hi);
  return CLI::Validator(
      [range](std::string& text) -> std::string {
        if (is_auto_max_model_len(text)) return {};
        std::string problem = range(text);
        if (!problem.empty()) problem += " (or auto: the largest the KV cache holds)";
        return problem;
      },
      "INT or auto");
}

CLI::Validator real_range(double lo, double hi, bool lo_open, bool hi_open) {
  const std::string range = std::string(lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) +
                            (hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        const char* end = text.data() + text.size();
        const char* begin = text.data() + (text.size() > 1 && text[0] == '+');
        const auto [ptr, ec] = std::from_chars(begin, end, v);
        const bool in_range = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
        if (text.empty() || ec != std::errc{} || ptr != end || !std::isfinite(v) || !in_range)
          return "expected a finite number in " + range + ", got '" + excerpt(text, 40) + "'";
        return {};
      },
      "NUMBER in " + range);
}

std::int64_t max_threads() {
  return static_cast<std::int64_t>(kThreadsPerCore) * std::max(1u, std::thread::hardware_concurrency());
}

CLI::Validator thread_count() {
  const std::int64_t hi = max_threads();
  CLI::Validator range = int_range(0, hi);
  return CLI::Validator(
      [range, hi](std::string& text) -> std::string {
        std::string problem = range(text);
        if (!problem.empty())
          problem += " (0: one per hardware thread; at most " + std::to_string(kThreadsPerCore) +
                     " per hardware thread, " + std::to_string(hi) + " here)";
        return problem;
      },
      "INT in [0 - " + std::to_string(hi) + "]");
}

CLI::Validator core_thread_count() {
  const std::int64_t hi = std::max(1u, std::thread::hardware_concurrency());
  CLI::Validator range = int_range(1, hi);
  return CLI::Validator(
      [range, hi](std::string& text) -> std::string {
        std::string problem = range(text);
        if (!problem.empty()) problem += " (at most one per hardware thread, " + std::to_string(hi) + " here)";
        return problem;
      },
      "INT in [1 - " + std::to_string(hi) + "]");
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& text) -> std::string { return text.empty() ? "expected a non-empty value" : ""; },
                        "NON-EMPTY");
}

}  // namespace twin::cli
