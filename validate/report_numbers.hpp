#pragma once
// Figures as validate's reports print them (report.md, report.html): fixed
// decimals and signed percentages, with the report's own mark for a figure
// that has no data (NaN or infinite).
#include <cmath>
#include <cstdio>
#include <string>

namespace twin {

inline std::string fixed_or(double v, int decimals, const char* missing) {
  if (!std::isfinite(v)) return missing;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

inline std::string signed_pct_or(double v, const char* missing) {
  if (!std::isfinite(v)) return missing;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f%%", v);
  return buf;
}

}  // namespace twin
