#pragma once
// Flag groups every subcommand that reads a trace or writes results shares,
// registered in one place so their names, aliases, checks and help cannot
// drift apart between run, simulate, validate, sweep and plan.
#include <cstdint>
#include <string>

#include "traces/trace_reader.hpp"

namespace CLI {
class App;
}

namespace twin::cli {

// --trace, --format, --on-bad-row, --max-requests.
struct TraceInputFlags {
  std::string path;
  std::string format;  // empty: detected
  std::string on_bad_row = "error";
  std::int64_t max_requests = 0;  // 0: the whole trace
};
void add_trace_input_flags(CLI::App& sub, TraceInputFlags& flags, const std::string& trace_help, bool required);
// The reader's options the flags name (UsageError for an unknown format or policy).
TraceReadOptions trace_read_options(const TraceInputFlags& flags);

// --out and --overwrite.
struct OutputFlags {
  std::string dir;
  bool overwrite = false;
};
void add_output_flags(CLI::App& sub, OutputFlags& flags, const std::string& out_help, bool required);

}  // namespace twin::cli
