#include "metrics/csv_fields.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>

#include "base/error.hpp"

namespace twin::csv {
namespace {

// Integer part and zero-padded fraction of ns / unit.
void append_scaled(std::string& out, Time ns, Time unit, int digits) {
  if (ns == kNoTime) return;
  std::uint64_t magnitude = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  if (ns < 0) out += '-';
  const auto u = static_cast<std::uint64_t>(unit);
  std::array<char, 32> buffer{};
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), magnitude / u);
  out.append(buffer.data(), end);
  out += '.';
  std::uint64_t fraction = magnitude % u;
  std::array<char, 16> frac{};
  for (int i = digits - 1; i >= 0; --i) {
    frac[i] = static_cast<char>('0' + fraction % 10);
    fraction /= 10;
  }
  out.append(frac.data(), digits);
  (void)ec;
}

// Parses "[-]INT[.FRAC]" exactly into units of 10^-digits.
bool parse_scaled(std::string_view text, int digits, Time& value) {
  bool negative = false;
  if (!text.empty() && text.front() == '-') {
    negative = true;
    text.remove_prefix(1);
  }
  const auto dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (whole.empty() || fraction.size() > static_cast<std::size_t>(digits)) return false;
  if (dot != std::string_view::npos && fraction.empty()) return false;
  std::int64_t result = 0;
  for (const char c : whole) {
    if (c < '0' || c > '9') return false;
    if (result > (std::numeric_limits<std::int64_t>::max() - 9) / 10 / 1'000'000'000) return false;
    result = result * 10 + (c - '0');
  }
  std::int64_t frac = 0;
  for (int i = 0; i < digits; ++i) {
    const char c = i < static_cast<int>(fraction.size()) ? fraction[i] : '0';
    if (c < '0' || c > '9') return false;
    frac = frac * 10 + (c - '0');
  }
  std::int64_t scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  value = result * scale + frac;
  if (negative) value = -value;
  return true;
}

std::vector<std::string> split_line(std::string_view line, bool& ok) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  ok = true;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"' && fields.back().empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  ok = !quoted;
  return fields;
}

}  // namespace

void append_int(std::string& out, std::int64_t value) {
  std::array<char, 32> buffer{};
  const auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  out.append(buffer.data(), end);
  (void)ec;
}

void append_seconds(std::string& out, Time ns) { append_scaled(out, ns, kNsPerSec, 9); }
void append_millis(std::string& out, Time ns) { append_scaled(out, ns, kNsPerMs, 6); }

void append_fixed(std::string& out, double value, int decimals) {
  if (!std::isfinite(value)) return;  // no data: empty field
  std::array<char, 400> buffer{};
  const auto [end, ec] =
      std::to_chars(buffer.data(), buffer.data() + buffer.size(), value, std::chars_format::fixed, decimals);
  if (ec == std::errc()) out.append(buffer.data(), end);
}

void append_text(std::string& out, std::string_view text) {
  const bool needs_quotes = text.find_first_of(",\"\n\r") != std::string_view::npos ||
                            (!text.empty() && (text.front() == ' ' || text.back() == ' '));
  if (!needs_quotes) {
    out += text;
    return;
  }
  out += '"';
  for (const char c : text) {
    if (c == '"') {
      out += "\"\"";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  out += '"';
}

// A field or column name inside an error, cut short: a malformed file may
// hold a megabyte in one field.
std::string quoted(std::string_view text) {
  std::string out(1, '"');
  out += excerpt(text, 80);
  out += '"';
  return out;
}

Reader::Reader(const std::filesystem::path& path, const std::vector<std::string>& columns, std::size_t num_required)
    : path_(path), in_(path, std::ios::binary), columns_(columns) {
  if (!in_) throw Error(path.string() + ": cannot open for reading");
  std::string header;
  if (!std::getline(in_, header)) throw Error(path.string() + ":1: empty file; expected a header line");
  line_number_ = 1;
  if (!header.empty() && header.back() == '\r') header.pop_back();
  bool ok = true;
  const std::vector<std::string> names = split_line(header, ok);
  std::map<std::string, std::size_t> position;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!position.emplace(names[i], i).second) {
      throw Error(where() + ": column " + csv::quoted(names[i]) + " appears twice");
    }
  }
  std::string expected;
  for (const auto& name : columns_) expected += (expected.empty() ? "" : ",") + name;
  for (const auto& name : names) {
    if (std::find(columns_.begin(), columns_.end(), name) == columns_.end()) {
      throw Error(where() + ": unknown column " + csv::quoted(name) + "; expected the columns " + expected);
    }
  }
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    const auto it = position.find(columns_[c]);
    if (it == position.end()) {
      if (c >= num_required) {
        index_.push_back(kAbsent);
        continue;
      }
      throw Error(where() + ": missing column \"" + columns_[c] + "\"; expected the columns " + expected);
    }
    index_.push_back(it->second);
  }
  num_fields_ = names.size();
}

bool Reader::next() {
  std::string line;
  while (std::getline(in_, line)) {
    ++line_number_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    bool ok = true;
    fields_ = split_line(line, ok);
    if (!ok) throw Error(where() + ": unterminated quoted field");
    if (fields_.size() != num_fields_) {
      throw Error(where() + ": " + std::to_string(fields_.size()) + " fields; expected " +
                  std::to_string(num_fields_));
    }
    return true;
  }
  if (in_.bad()) throw Error(path_.string() + ": read error");
  return false;
}

std::string Reader::where() const { return path_.string() + ":" + std::to_string(line_number_); }

void Reader::fail(std::size_t column, const std::string& what) const {
  throw Error(where() + ": column " + columns_[column] + ": " + what);
}

std::int64_t Reader::integer(std::size_t column) const {
  const std::string_view field = text(column);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size()) {
    fail(column, csv::quoted(field) + " is not an integer");
  }
  return value;
}

std::int32_t Reader::int32(std::size_t column) const {
  const std::int64_t value = integer(column);
  if (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max()) {
    fail(column, std::to_string(value) + " is out of range");
  }
  return static_cast<std::int32_t>(value);
}

Time Reader::seconds(std::size_t column, bool optional) const {
  const std::string_view field = text(column);
  if (field.empty() && optional) return kNoTime;
  Time value = 0;
  if (!parse_scaled(field, 9, value)) {
    fail(column, csv::quoted(field) + " is not a time in seconds with at most 9 decimals");
  }
  return value;
}

Time Reader::millis(std::size_t column, bool optional) const {
  const std::string_view field = text(column);
  if (field.empty() && optional) return kNoTime;
  Time value = 0;
  if (!parse_scaled(field, 6, value)) {
    fail(column, csv::quoted(field) + " is not a duration in milliseconds with at most 6 decimals");
  }
  return value;
}

}  // namespace twin::csv
