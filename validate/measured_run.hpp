#pragma once
// A run measured elsewhere, as request records on the trace's requests, for
// `validate --measured`: our own requests.csv (from `run`, `simulate` or
// `bench`), matched to the trace by request id, or the result JSON of
// `vllm bench serve --save-result --save-detailed` (or of `twinserve bench`),
// matched by order: its i-th entry is the trace's i-th request, the order
// the client sent them. docs/validate.md ("Against a run measured
// elsewhere") lists the fields read.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/core/records.hpp"
#include "engine/core/request.hpp"

namespace twin {

struct MeasuredRun {
  std::string format;  // "requests.csv" or "vllm"
  std::vector<RequestRecord> records;  // one per trace request, in trace order
  // Arrivals are the client's own send times (requests.csv; vLLM's
  // start_times), not the trace's timestamps.
  bool send_times = false;
  bool itl = false;  // inter-token gaps are known (vLLM's itls)
  // vLLM entries whose chunks carried several tokens (itls shorter than
  // output_lens - 1): their gaps are left out of ITL.
  std::int64_t gaps_left_out = 0;
  // vLLM entries whose input_lens differ from the trace's prompt length
  // (a tokenizer or chat template on the client's side), and the first.
  std::int64_t prompt_mismatches = 0;
  std::string first_prompt_mismatch;
};

// `trace` must be the requests the measured client sent, in the order it
// sent them. Errors name the file, the key or column, and the request.
MeasuredRun read_measured_run(const std::filesystem::path& path, const std::vector<Request>& trace);

// The requests a simulation of the run serves: the trace's, each arriving
// when the measured client sent it, and a finished one generating the
// tokens it measured (a real server may stop at EOS before the trace's
// target).
std::vector<Request> measured_requests(std::vector<Request> trace, const MeasuredRun& run);

}  // namespace twin
