#pragma once
// The per-request lists `vllm bench serve --save-result --save-detailed`
// adds to its result JSON (vllm/benchmarks/serve.py), read back for
// `validate --measured` and written by `twinserve bench` beside the summary
// keys of vllm_result.hpp, so either side's file reads in the other's tools.
// One entry per request in the order the client sent them; times in seconds.
// docs/validate.md lists the keys read and how they become records.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/records.hpp"

namespace twin {

struct VllmRequestEntry {
  std::int32_t input_len = 0;   // input_lens: prompt tokens (the server's usage count when it gave one)
  std::int32_t output_len = 0;  // output_lens: tokens generated (0 for a failed request)
  double ttft_s = 0;            // ttfts: send to first token chunk
  std::vector<double> itl_s;    // itls: gaps between token chunks
  // start_times (vLLM since mid-2025): the client's clock when the request
  // was sent (time.perf_counter(): only differences mean anything).
  std::optional<double> start_time_s;
  std::optional<double> latency_s;  // latencies (newest vLLM): send to last token chunk
  std::string error;                // errors: empty for a success
  // twinserve's own list (issue 44), not vLLM's: the request's share of its
  // steps' energy (requests.csv's energy_j); absent where not known.
  std::optional<double> energy_j;
};

struct VllmDetailedResult {
  std::vector<VllmRequestEntry> requests;
  bool has_start_times = false, has_latencies = false;
};

// Reads a result JSON file. Errors (twin::Error) name the file and the key
// (and the request's index) for a missing detailed list (the file was saved
// without --save-detailed), lists of different lengths and values of the
// wrong type or out of range.
VllmDetailedResult read_vllm_detailed(const std::filesystem::path& path);

// A record as `vllm bench serve` would have listed it: its lengths, TTFT,
// gaps and latency from the record's own times (arrival as the start), its
// reason as the error of one that did not finish.
VllmRequestEntry vllm_request_entry(const RequestRecord& record);

// Adds input_lens, output_lens, ttfts, itls, start_times, latencies and
// errors to a result JSON (generated_texts is not written: no text is kept).
void add_vllm_detailed(nlohmann::ordered_json& result, const std::vector<VllmRequestEntry>& requests);

}  // namespace twin
