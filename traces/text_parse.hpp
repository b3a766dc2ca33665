#pragma once
// Hand-written number and timestamp parsing for the trace readers. They run
// once per field of multi-million-row files, so they never allocate and never
// touch locales; each returns false on malformed text instead of throwing.
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/types.hpp"

namespace twin {

// Whole string must be an optionally signed base-10 integer.
bool parse_int64(std::string_view text, std::int64_t& out);
bool parse_int32(std::string_view text, std::int32_t& out);
bool parse_uint64(std::string_view text, std::uint64_t& out);

// A decimal number ("12", "-3.25", "1.5e3") in some unit, converted to integer
// nanoseconds. Plain decimals are converted exactly (digits beyond 1 ns are
// rounded half away from zero) so "0.000000001" seconds is 1 ns on every
// platform; only exponent forms go through a double. unit_ns is the length of
// one unit in ns (1e9 for seconds, 1e6 for milliseconds).
bool parse_decimal_time(std::string_view text, Time unit_ns, Time& out);

// "2023-11-16 18:15:46.6805900" (also with 'T' as separator and 0-9 fraction
// digits) as ns since 1970-01-01 UTC, optionally followed by a UTC offset
// ("+00:00", "-05:30", "+0530" or "Z", as Azure 2024 writes them) that is
// subtracted exactly. Without an offset the time is taken as UTC.
bool parse_datetime_ns(std::string_view text, Time& out);

// ns since 1970-01-01 UTC as "2024-01-01 00:00:01.500000000" (Azure's
// layout with 9 fraction digits), which parse_datetime_ns reads back exactly.
// Years 1678..2261 (the reach of int64 ns).
void append_datetime_9(std::string& out, Time ns);

// At most `max_chars` bytes of input for an error message, bytes outside
// printable ASCII written as \xNN: a message never carries raw binary (a
// compressed or corrupt file) to the terminal. "..." marks a cut.
std::string printable_excerpt(std::string_view text, std::size_t max_chars);

// Seconds with exactly 9 decimals: the text our own formats write, which
// parse_decimal_time reads back to the same ns.
void append_seconds_9(std::string& out, Time ns);

// An integer's decimal text, appended (the writers build rows without streams).
template <class Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, res.ptr);
}

}  // namespace twin
