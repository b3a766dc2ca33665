#pragma once
// The validation's outputs: report.json (machine-readable, the keys of
// docs/validate.md), report.md (tables and plot links), report.html (one
// self-contained page: predicted against measured across loads, inline SVG),
// gnuplot plots per load, and a compact table for the terminal.
#include <filesystem>
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "validate/validation.hpp"

namespace twin {

nlohmann::ordered_json report_json(const ValidationResult& result);

// Pieces of report.json that `validate --measured`'s report shares: a
// metric as {"measured": {stat: value}, "predicted": {...}, "error_pct":
// {...}} (throughput as three numbers), and the per-request error
// distributions keyed by metric.
nlohmann::ordered_json metric_comparison_json(const std::vector<MetricComparison>& metrics);
nlohmann::ordered_json request_errors_json(const std::vector<RequestErrorStats>& errors);

// Writes each load folder's plot data (requests.dat, steps.dat) and plots.gp,
// and runs gnuplot on it when `run_gnuplot` and gnuplot is on the PATH.
// Returns "" when the plots were made, else why not (for report.md).
std::string write_plots(const ValidationResult& result, const std::filesystem::path& out_dir, bool run_gnuplot);

// report.md; `plot_note` is write_plots' answer.
void write_report_markdown(std::ostream& out, const ValidationResult& result, const std::string& plot_note);

// report.html: per figure (TTFT, TPOT, E2E latency at p50 and p90, output
// throughput) one chart of the measurement and every cost model's prediction
// against the offered load, then the error table. Nothing to fetch; the same
// result gives the same bytes.
std::string report_html(const ValidationResult& result);

// A few lines per load: p50/p90 of TTFT, TPOT, E2EL and throughput, measured,
// calibrated and roofline, with the parity figure.
void print_validation_table(std::ostream& out, const ValidationResult& result);

}  // namespace twin
