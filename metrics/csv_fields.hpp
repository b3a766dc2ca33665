#pragma once
// Internal to metrics/: formatting and parsing of CSV fields. Numbers are
// printed without the C library's locale (integer arithmetic, to_chars), so
// the bytes do not depend on the process locale. Times print exactly from
// integer nanoseconds and parse back to the same integers.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/types.hpp"

namespace twin::csv {

void append_int(std::string& out, std::int64_t value);
void append_seconds(std::string& out, Time ns);  // "12.345678901"; empty for kNoTime
void append_millis(std::string& out, Time ns);   // "12.345678"; empty for kNoTime
void append_fixed(std::string& out, double value, int decimals);
// Quotes when needed (RFC 4180); line breaks become spaces so a row is a line.
void append_text(std::string& out, std::string_view text);
// The text in double quotes, for error messages (call it csv::quoted: an
// unqualified call with a std::string finds std::quoted).
std::string quoted(std::string_view text);  // cut to 80 characters

// Reads a CSV file line by line; errors name file:line and the column.
class Reader {
 public:
  // Columns from `num_required` on may be absent from the file (has()).
  Reader(const std::filesystem::path& path, const std::vector<std::string>& columns,
         std::size_t num_required = static_cast<std::size_t>(-1));
  bool has(std::size_t column) const { return index_[column] != kAbsent; }
  bool next();  // false at end of file; skips blank lines

  std::string_view text(std::size_t column) const { return fields_[index_[column]]; }
  std::int64_t integer(std::size_t column) const;
  std::int32_t int32(std::size_t column) const;
  Time seconds(std::size_t column, bool optional = false) const;  // empty -> kNoTime if optional
  Time millis(std::size_t column, bool optional = false) const;
  [[noreturn]] void fail(std::size_t column, const std::string& what) const;

 private:
  std::string where() const;

  std::filesystem::path path_;
  std::ifstream in_;
  std::vector<std::string> columns_;
  static constexpr std::size_t kAbsent = static_cast<std::size_t>(-1);
  std::vector<std::size_t> index_;  // expected column -> position in the file, or kAbsent
  std::size_t num_fields_ = 0;      // columns in the file
  std::vector<std::string> fields_;
  std::size_t line_number_ = 0;
};

}  // namespace twin::csv
