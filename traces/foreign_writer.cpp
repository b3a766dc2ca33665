// Rows in the public formats `trace convert --to` writes, for tools that read
// those and not ours. Each holds less than a Request; TraceWriter counts what
// a row could not carry (trace_writer.cpp).
#include <charconv>
#include <string>

#include "traces/text_parse.hpp"
#include "traces/trace_writer.hpp"

namespace twin {

namespace {

// Milliseconds, exact: an integer where the time is whole ms, else the
// fraction to the ns with trailing zeros dropped (Mooncake readers take a
// JSON number either way).
void append_ms_exact(std::string& out, Time ns) {
  if (ns < 0) {
    out.push_back('-');
    ns = -ns;
  }
  append_int(out, ns / kNsPerMs);
  Time frac = ns % kNsPerMs;
  if (frac == 0) return;
  char digits[6];
  for (int i = 5; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  int len = 6;
  while (digits[len - 1] == '0') --len;
  out.push_back('.');
  out.append(digits, static_cast<std::size_t>(len));
}

// Azure's timestamps are absolute; arrivals are written on a clock that
// starts at 2024-01-01 00:00:00 UTC (readers rebase to the first row).
constexpr Time kAzureEpochNs = Time{1704067200} * kNsPerSec;

}  // namespace

void append_mooncake(std::string& out, const Request& r) {
  out += "{\"timestamp\":";
  append_ms_exact(out, r.arrival);
  out += ",\"input_length\":";
  append_int(out, r.prompt_len);
  out += ",\"output_length\":";
  append_int(out, r.output_len);
  out += ",\"hash_ids\":[";
  for (std::size_t i = 0; i < r.hash_ids.size(); ++i) {
    if (i) out.push_back(',');
    append_int(out, r.hash_ids[i]);
  }
  out += "]}";
}

const char* vidur_csv_header() { return "arrived_at,num_prefill_tokens,num_decode_tokens"; }

void append_vidur(std::string& out, const Request& r) {
  append_seconds_9(out, r.arrival);
  out.push_back(',');
  append_int(out, r.prompt_len);
  out.push_back(',');
  append_int(out, r.output_len);
}

const char* azure_csv_header() { return "TIMESTAMP,ContextTokens,GeneratedTokens"; }

void append_azure(std::string& out, const Request& r) {
  append_datetime_9(out, kAzureEpochNs + r.arrival);
  out.push_back(',');
  append_int(out, r.prompt_len);
  out.push_back(',');
  append_int(out, r.output_len);
}

}  // namespace twin
