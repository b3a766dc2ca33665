#pragma once
// A trace held in memory, read once and shared read-only by every probe and
// thread of a plan or sweep; and a request source that replays a prefix of it
// with its arrival times rescaled to a target rate (the trace's arrival
// pattern kept, only stretched or squeezed).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/request.hpp"
#include "sim/simulator.hpp"
#include "traces/trace_reader.hpp"

namespace twin {

struct LoadedTrace {
  std::string path;
  std::vector<Request> requests;  // arrival order
};

// Reads every request; Error naming the file for bad rows (per options).
LoadedTrace load_trace(const std::string& path, const TraceReadOptions& options = {});

// (n - 1) / (last arrival - first arrival) over the first `count` requests
// (0: all); 0 when fewer than two requests or all arrive at once.
double arrival_rate(const LoadedTrace& trace, std::size_t count = 0);
double mean_output_tokens(const LoadedTrace& trace, std::size_t count = 0);
// Nearest-rank percentile of the prompt lengths (p in (0, 100]).
std::int32_t prompt_len_percentile(const LoadedTrace& trace, double p);

// The first `count` requests (0: all), shifted so the first arrives at 0 and
// replayed `speedup` times faster (2: twice the rate), cancel times with the
// arrivals: the one rule of engine/core/timeline.hpp. An infinite speedup
// sends every request at 0, patience kept (a trace whose requests all
// arrive at once has no rate to scale).
class ScaledTraceSource final : public RequestSource {
 public:
  ScaledTraceSource(const LoadedTrace& trace, std::size_t count, double speedup);
  bool next(Request& out) override;

 private:
  const LoadedTrace& trace_;
  std::size_t count_, next_ = 0;
  double speedup_;
};

}  // namespace twin
