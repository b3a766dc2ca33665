#pragma once
// The one parser of KEY=VALUE option values (--set, config files, presets'
// overrides): integers and reals in a range, booleans, names from a table.
// Errors are UsageError "<what> 'KEY': bad value 'V', expected ...", the key
// and value cut short.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.hpp"

namespace twin {

std::string bad_option_value(std::string_view what, std::string_view key, std::string_view value,
                             std::string_view expected);
std::int64_t option_int(std::string_view what, std::string_view key, std::string_view value, std::int64_t lo,
                        std::int64_t hi);
double option_real(std::string_view what, std::string_view key, std::string_view value, double lo, double hi);
// true, 1, on, yes / false, 0, off, no.
bool option_bool(std::string_view what, std::string_view key, std::string_view value);

template <class Enum, std::size_t N>
Enum option_enum(std::string_view what, std::string_view key, std::string_view value,
                 const std::pair<const char*, Enum> (&table)[N]) {
  std::string known;
  for (const auto& [name, e] : table) {
    if (value == name) return e;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  throw UsageError(bad_option_value(what, key, value, "one of: " + known));
}

}  // namespace twin
