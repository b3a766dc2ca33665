#include "traces/text_parse.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace twin {

namespace {

template <class Int>
bool parse_whole(std::string_view text, Int& out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads exactly n digits at text[pos..]; false if any is not a digit.
bool fixed_digits(std::string_view text, std::size_t pos, int n, int& out) {
  if (pos + static_cast<std::size_t>(n) > text.size()) return false;
  int v = 0;
  for (int i = 0; i < n; ++i) {
    char c = text[pos + static_cast<std::size_t>(i)];
    if (!is_digit(c)) return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil algorithm).
std::int64_t days_from_civil(int y, int m, int d) {
  y -= m <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return static_cast<std::int64_t>(era) * 146097 + doe - 719468;
}

// The inverse: year, month, day of a count of days since 1970-01-01
// (Hinnant's civil_from_days).
void civil_from_days(std::int64_t z, int& y, int& m, int& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<int>(z - era * 146097);
  const int yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = static_cast<int>(yoe + era * 400) + (m <= 2);
}

void append_digits(std::string& out, std::int64_t v, int width) {
  char buf[24];
  for (int i = width - 1; i >= 0; --i) {
    buf[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  out.append(buf, static_cast<std::size_t>(width));
}

}  // namespace

void append_datetime_9(std::string& out, Time ns) {
  std::int64_t secs = ns / kNsPerSec;
  std::int64_t frac = ns % kNsPerSec;
  if (frac < 0) {
    frac += kNsPerSec;
    --secs;
  }
  std::int64_t days = secs / 86400;
  std::int64_t sod = secs % 86400;
  if (sod < 0) {
    sod += 86400;
    --days;
  }
  int y = 0, m = 0, d = 0;
  civil_from_days(days, y, m, d);
  append_digits(out, y, 4);
  out.push_back('-');
  append_digits(out, m, 2);
  out.push_back('-');
  append_digits(out, d, 2);
  out.push_back(' ');
  append_digits(out, sod / 3600, 2);
  out.push_back(':');
  append_digits(out, sod / 60 % 60, 2);
  out.push_back(':');
  append_digits(out, sod % 60, 2);
  out.push_back('.');
  append_digits(out, frac, 9);
}

bool parse_int64(std::string_view text, std::int64_t& out) { return parse_whole(text, out); }
bool parse_int32(std::string_view text, std::int32_t& out) { return parse_whole(text, out); }
bool parse_uint64(std::string_view text, std::uint64_t& out) { return parse_whole(text, out); }

bool parse_decimal_time(std::string_view text, Time unit_ns, Time& out) {
  if (text.empty()) return false;
  if (text.find_first_of("eE") != std::string_view::npos) {
    // Rare in traces; a double is exact enough for exponent notation.
    std::string copy(text);
    char* end = nullptr;
    double v = std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size() || !std::isfinite(v)) return false;
    double ns = v * static_cast<double>(unit_ns);
    if (std::fabs(ns) > 9.0e18) return false;
    out = static_cast<Time>(std::llround(ns));
    return true;
  }
  bool negative = false;
  std::size_t pos = 0;
  if (text[0] == '-' || text[0] == '+') {
    negative = text[0] == '-';
    pos = 1;
  }
  std::int64_t whole = 0;
  std::size_t whole_digits = 0;
  while (pos < text.size() && is_digit(text[pos])) {
    if (whole > (std::numeric_limits<std::int64_t>::max() - 9) / 10) return false;
    whole = whole * 10 + (text[pos] - '0');
    ++pos;
    ++whole_digits;
  }
  // Fraction as a count of unit / 10^k, kept to ns resolution.
  std::int64_t frac_ns = 0;
  std::size_t frac_digits = 0;
  bool round_up = false;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    Time scale = unit_ns;  // ns worth of one unit of the current digit
    bool rounding_seen = false;
    while (pos < text.size() && is_digit(text[pos])) {
      const int digit = text[pos] - '0';
      if (scale >= 10) {
        scale /= 10;
        frac_ns += digit * scale;
      } else if (!rounding_seen) {
        // First digit below 1 ns decides rounding; later ones are ignored.
        round_up = digit >= 5;
        rounding_seen = true;
      }
      ++pos;
      ++frac_digits;
    }
    if (frac_digits == 0 && whole_digits == 0) return false;
  }
  if (pos != text.size() || (whole_digits == 0 && frac_digits == 0)) return false;
  if (whole > std::numeric_limits<std::int64_t>::max() / unit_ns - 1) return false;
  Time ns = whole * unit_ns + frac_ns + (round_up ? 1 : 0);
  out = negative ? -ns : ns;
  return true;
}

bool parse_datetime_ns(std::string_view text, Time& out) {
  // YYYY-MM-DD HH:MM:SS[.fffffff]
  int y, mo, d, h, mi, s;
  if (text.size() < 19) return false;
  if (!fixed_digits(text, 0, 4, y) || text[4] != '-' || !fixed_digits(text, 5, 2, mo) ||
      text[7] != '-' || !fixed_digits(text, 8, 2, d) || (text[10] != ' ' && text[10] != 'T') ||
      !fixed_digits(text, 11, 2, h) || text[13] != ':' || !fixed_digits(text, 14, 2, mi) ||
      text[16] != ':' || !fixed_digits(text, 17, 2, s))
    return false;
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 60) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (d > kDays[mo - 1] + (mo == 2 && leap ? 1 : 0)) return false;
  // Nanoseconds since 1970 in an int64 reach 1677-09-21 .. 2262-04-11.
  if (y < 1678 || y > 2261) return false;
  Time frac = 0;
  std::size_t pos = 19;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    Time scale = kNsPerSec;
    std::size_t digits = 0;
    while (pos < text.size() && is_digit(text[pos])) {
      scale /= 10;
      frac += (text[pos] - '0') * scale;  // digits past 9 add 0
      ++pos;
      ++digits;
    }
    if (digits == 0) return false;
  }
  // A UTC offset (Azure 2024: "+00:00") names the same instant in UTC, so
  // traces written in different zones line up: local minus offset.
  std::int64_t offset_s = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    int oh = 0, om = 0;
    if (!fixed_digits(text, pos + 1, 2, oh)) return false;
    pos += 3;
    if (pos < text.size() && text[pos] == ':') ++pos;
    if (!fixed_digits(text, pos, 2, om)) return false;
    pos += 2;
    if (oh > 23 || om > 59) return false;
    offset_s = sign * (oh * 3600 + om * 60);
  }
  if (pos != text.size()) return false;
  const std::int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset_s;
  out = secs * kNsPerSec + frac;
  return true;
}

std::string printable_excerpt(std::string_view text, std::size_t max_chars) {
  std::string out;
  const std::string_view head = text.substr(0, max_chars);
  for (char ch : head) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(ch);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (text.size() > max_chars) out += "...";
  return out;
}

void append_seconds_9(std::string& out, Time ns) {
  char buf[32];
  char* p = buf;
  std::uint64_t mag;
  if (ns < 0) {
    *p++ = '-';
    mag = static_cast<std::uint64_t>(-(ns + 1)) + 1;
  } else {
    mag = static_cast<std::uint64_t>(ns);
  }
  const std::uint64_t whole = mag / 1'000'000'000u;
  std::uint64_t frac = mag % 1'000'000'000u;
  p = std::to_chars(p, buf + sizeof(buf), whole).ptr;
  *p++ = '.';
  for (int i = 8; i >= 0; --i) {
    p[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  p += 9;
  out.append(buf, p);
}

}  // namespace twin
