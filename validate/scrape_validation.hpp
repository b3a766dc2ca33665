#pragma once
// validate --measured on a run of /metrics scrapes: the trace replayed on
// the deployment and compared with what the server's histograms grew by
// over the run (validate/fit_scrape.hpp's comparison, as calibrate's
// report makes it). docs/validate.md ("Against a run measured elsewhere").
#include <iosfwd>

#include <nlohmann/json.hpp>

#include "validate/measured_validation.hpp"

namespace twin {

// Fills `v.scrape`, `v.predicted` (written to OUT/predicted) and
// `v.warnings`. Errors as calibrate --measured's for the same run.
void validate_scrapes(const MeasuredValidateOptions& o, MeasuredValidation& v);

nlohmann::ordered_json scrape_report_json(const MeasuredValidation& v);
void write_scrape_report_markdown(std::ostream& out, const MeasuredValidation& v);
void print_scrape_table(std::ostream& out, const MeasuredValidation& v);

}  // namespace twin
