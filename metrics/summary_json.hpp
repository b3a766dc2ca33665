#pragma once
// summary.json: keys in a fixed order, doubles rounded to 6 decimals so that
// the bytes are stable and diffs readable; NaN (no data) is null.
#include <filesystem>
#include <iosfwd>

#include <nlohmann/json.hpp>

#include "metrics/summary.hpp"

namespace twin {

// The one number formatter of every JSON output (summary.json, report.json,
// plan.json): rounded to 6 decimals, -0 written as 0, NaN and infinities
// (no data) as null.
nlohmann::ordered_json json_figure(double value);

// A latency metric's statistics, in the one shape every JSON output gives
// them (summary.json, plan.json's probes, report.json's measured and
// predicted sides): {"count", "mean", "std", "p50", "p90", "p99", "max"}. Figures
// are json_figure's, or exact where a file is read back and must give the
// same decisions (plan.json across MPI ranks and resumed plans).
enum class Figures { rounded, exact };
nlohmann::ordered_json latency_stats_json(const LatencyStats& stats, Figures figures = Figures::rounded);
// That shape read back (plan.json between MPI ranks); null is NaN.
LatencyStats latency_stats_from_json(const nlohmann::json& json);

nlohmann::ordered_json summary_to_json(const Summary& summary);
// summary.json's "measured_energy" (an engine run's counter reading), also in validate's report.
nlohmann::ordered_json measured_energy_json(const MeasuredEnergy& measured);
void write_summary_json(std::ostream& out, const Summary& summary);  // pretty, 2 spaces, final newline

}  // namespace twin
