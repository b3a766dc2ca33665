#pragma once
// summary.json: keys in a fixed order, doubles rounded to 6 decimals so that
// the bytes are stable and diffs readable; NaN (no data) is null.
#include <filesystem>
#include <iosfwd>

#include <nlohmann/json.hpp>

#include "metrics/summary.hpp"

namespace twin {

nlohmann::ordered_json summary_to_json(const Summary& summary);
void write_summary_json(std::ostream& out, const Summary& summary);  // pretty, 2 spaces, final newline

}  // namespace twin
