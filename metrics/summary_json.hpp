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

nlohmann::ordered_json summary_to_json(const Summary& summary);
void write_summary_json(std::ostream& out, const Summary& summary);  // pretty, 2 spaces, final newline

}  // namespace twin
