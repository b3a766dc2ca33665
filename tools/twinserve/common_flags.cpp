#include "tools/twinserve/common_flags.hpp"

#include <CLI/CLI.hpp>

#include "tools/twinserve/flag_checks.hpp"
#include "traces/trace_format.hpp"

namespace twin::cli {

void add_trace_input_flags(CLI::App& sub, TraceInputFlags& f, const std::string& trace_help, bool required) {
  CLI::Option* trace = sub.add_option("--trace", f.path, trace_help)->check(non_empty());
  if (required) trace->required();
  sub.add_option("--format", f.format, "Trace format (default: detected)");
  sub.add_option("--on-bad-row", f.on_bad_row, "A malformed trace row: error (stop, naming FILE:LINE) or skip (count)");
  sub.add_option("--max-requests", f.max_requests, "Use the trace's first N requests (default: all)")
      ->check(CLI::NonNegativeNumber);
}

TraceReadOptions trace_read_options(const TraceInputFlags& f) {
  TraceReadOptions read;
  if (!f.format.empty()) read.format = parse_format_name(f.format);
  read.on_bad_row = parse_bad_row_policy(f.on_bad_row);
  return read;
}

void add_output_flags(CLI::App& sub, OutputFlags& f, const std::string& out_help, bool required) {
  CLI::Option* out = sub.add_option("--out", f.dir, out_help)->check(non_empty());
  if (required) out->required();
  sub.add_flag("--overwrite", f.overwrite, "Replace result files already in --out");
}

}  // namespace twin::cli
