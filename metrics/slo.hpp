#pragma once
// Service level objectives and their parser. "ttft_p90<=2s,tpot_p99<=100ms"
// is a list of SLOs; each has a metric, an optional percentile and a
// threshold. Every SLO's threshold also applies per request for goodput
// (DistServe's definition): see docs/outputs.md for which per-request value
// is compared for each metric.
#include <string>
#include <string_view>
#include <vector>

namespace twin {

enum class Metric { ttft, tpot, itl, e2el };

struct Slo {
  Metric metric = Metric::ttft;
  double percentile = 0;    // in (0, 100]; 0: a per-request threshold only
  double threshold_ms = 0;  // > 0
};

// Grammar: SLO ("," SLO)*; SLO = METRIC ["_p" DECIMAL] "<=" NUMBER UNIT;
// METRIC = ttft | tpot | itl | e2el; UNIT = s | ms | us; DECIMAL =
// DIGITS ["." DIGITS]; NUMBER = DECIMAL [("e" | "E") ["+" | "-"] DIGITS].
// So "p1e1" and "p50." are refused, not read as 10 and 50. Whitespace around
// parts is ignored. An empty string gives no SLOs. Bad input throws
// twin::UsageError naming the failing part (cut to 80 characters) and what
// was expected.
std::vector<Slo> parse_slos(std::string_view text);

std::string_view metric_name(Metric metric);
// Canonical text of one SLO, e.g. "ttft_p90<=2000ms"; parse_slos reads it back.
std::string format_slo(const Slo& slo);
std::string format_slos(const std::vector<Slo>& slos);

}  // namespace twin
