#include "engine/core/option_values.hpp"

#include <charconv>

namespace twin {

std::string bad_option_value(std::string_view what, std::string_view key, std::string_view value,
                             std::string_view expected) {
  return std::string(what) + " '" + excerpt(key) + "': bad value '" + excerpt(value) + "', expected " +
         std::string(expected);
}

std::int64_t option_int(std::string_view what, std::string_view key, std::string_view value, std::int64_t lo,
                        std::int64_t hi) {
  std::int64_t v = 0;
  const auto* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc{} || ptr != end || v < lo || v > hi) {
    throw UsageError(bad_option_value(what, key, value,
                                      "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
  }
  return v;
}

double option_real(std::string_view what, std::string_view key, std::string_view value, double lo, double hi) {
  double v = 0;
  const auto* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc{} || ptr != end || !(v >= lo && v <= hi)) {
    throw UsageError(bad_option_value(what, key, value,
                                      "a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
  }
  return v;
}

bool option_bool(std::string_view what, std::string_view key, std::string_view value) {
  if (value == "true" || value == "1" || value == "on" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "off" || value == "no") return false;
  throw UsageError(bad_option_value(what, key, value, "true or false"));
}

}  // namespace twin
