#include "validate/measured_run.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "base/error.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/vllm_detailed.hpp"
#include "traces/trace_reader.hpp"

namespace twin {
namespace {

constexpr Time kMaxRunTime = 100'000'000 * kNsPerSec;  // 1e8 s: far below Time's range

std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

// Our own schema: rows in end order, matched to the trace by id; each row's
// arrival is the one the run recorded (bench: when it sent the request).
MeasuredRun from_requests_csv(const std::filesystem::path& path, const std::vector<Request>& trace) {
  MeasuredRun run;
  run.format = "requests.csv";
  run.send_times = true;
  std::unordered_map<RequestId, std::size_t> index;
  for (std::size_t i = 0; i < trace.size(); ++i) index.emplace(trace[i].id, i);
  std::vector<RequestRecord> by_trace(trace.size());
  std::vector<bool> seen(trace.size(), false);
  for (RequestRecord& r : read_request_records(path)) {
    const auto it = index.find(r.id);
    if (it == index.end()) {
      throw Error(path.string() + ": request id " + std::to_string(r.id) +
                  " is not in the trace (give validate the trace the measured run served, with the same --max-requests)");
    }
    if (seen[it->second]) throw Error(path.string() + ": request id " + std::to_string(r.id) + " has two rows");
    seen[it->second] = true;
    by_trace[it->second] = std::move(r);
  }
  const auto missing = static_cast<std::size_t>(std::count(seen.begin(), seen.end(), false));
  if (missing > 0) {
    const auto first = static_cast<std::size_t>(std::find(seen.begin(), seen.end(), false) - seen.begin());
    throw Error(path.string() + ": no row for " + std::to_string(missing) + " of the trace's " +
                std::to_string(trace.size()) + " requests (the first: id " + std::to_string(trace[first].id) +
                "); was the run given fewer requests (--max-requests)?");
  }
  run.records = std::move(by_trace);
  return run;
}

// vLLM's result JSON: entry i is trace request i. Arrivals are the send
// times (start_times, shifted to the trace's first arrival) when the file
// has them, else the trace's timestamps.
MeasuredRun from_vllm_json(const std::filesystem::path& path, const std::vector<Request>& trace) {
  const VllmDetailedResult detailed = read_vllm_detailed(path);
  if (detailed.requests.size() != trace.size()) {
    throw Error(path.string() + ": key \"input_lens\": " + std::to_string(detailed.requests.size()) +
                " requests, but the trace has " + std::to_string(trace.size()) +
                " (entries are matched to the trace's requests by order: give the trace the client sent, "
                "with --max-requests " + std::to_string(detailed.requests.size()) + " if it sent the first ones)");
  }
  MeasuredRun run;
  run.format = "vllm";
  run.send_times = detailed.has_start_times;
  run.itl = true;
  double first_start = 0;
  Time first_arrival = trace.front().arrival;
  for (const Request& r : trace) first_arrival = std::min(first_arrival, r.arrival);
  if (detailed.has_start_times) {
    first_start = detailed.requests.front().start_time_s.value_or(0);
    for (const VllmRequestEntry& e : detailed.requests) first_start = std::min(first_start, *e.start_time_s);
  }
  run.records.resize(trace.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const VllmRequestEntry& e = detailed.requests[i];
    RequestRecord& rec = run.records[i];
    rec.id = trace[i].id;
    rec.replica = 0;
    rec.arrival = detailed.has_start_times ? first_arrival + from_seconds(*e.start_time_s - first_start)
                                           : trace[i].arrival;
    rec.prompt_tokens = e.input_len;
    if (e.input_len != trace[i].prompt_len) {
      if (run.prompt_mismatches++ == 0) {
        run.first_prompt_mismatch = "entry " + std::to_string(i) + " (trace id " + std::to_string(trace[i].id) +
                                    "): input_lens " + std::to_string(e.input_len) + ", trace prompt " +
                                    std::to_string(trace[i].prompt_len);
      }
    }
    if (!e.error.empty()) {
      rec.outcome = Outcome::aborted;
      rec.reason = "client error: " + excerpt(e.error.substr(0, e.error.find('\n')), 120);
      rec.finish = rec.arrival;
      continue;
    }
    rec.outcome = Outcome::finished;
    rec.output_tokens = e.output_len;
    rec.first_token = rec.arrival + from_seconds(e.ttft_s);
    if (e.itl_s.size() + 1 == static_cast<std::size_t>(e.output_len)) {
      Time t = rec.first_token;
      for (const double gap : e.itl_s) {
        rec.itl.push_back(from_seconds(gap));
        t += rec.itl.back();
        if (t > kMaxRunTime) {
          throw Error(path.string() + ": key \"itls\": entry " + std::to_string(i) + ": the gaps add up to over 1e8 s");
        }
      }
      rec.finish = t;  // the last token chunk: vLLM's latency, exact in the gaps kept
    } else {
      ++run.gaps_left_out;
      const double chunks_s = std::accumulate(e.itl_s.begin(), e.itl_s.end(), 0.0);
      rec.finish = e.latency_s ? rec.arrival + from_seconds(*e.latency_s) : rec.first_token + from_seconds(chunks_s);
      rec.finish = std::max(rec.finish, rec.first_token);
    }
  }
  return run;
}

}  // namespace

MeasuredRun read_measured_run(const std::filesystem::path& path, const std::vector<Request>& trace) {
  if (trace.empty()) throw Error(path.string() + ": no trace requests to match the measured run with");
  const std::string ext = lower_extension(path);
  if (ext == ".csv") return from_requests_csv(path, trace);
  if (ext == ".json") return from_vllm_json(path, trace);
  throw UsageError("--measured " + path.string() +
                   ": expected a requests.csv (ours) or a .json result of `vllm bench serve --save-result --save-detailed`");
}

std::vector<Request> measured_requests(std::vector<Request> trace, const MeasuredRun& run) {
  // A client's send times can come a few microseconds out of order (vllm
  // bench serve stamps each request in its own task): a request sent
  // earlier than the one before it is served from that one's time, within
  // the trace reader's tolerance for a trace's own disorder.
  const Time tolerance = from_seconds(TraceReadOptions{}.backwards_tolerance_s);
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const RequestRecord& m = run.records[i];
    trace[i].arrival = m.arrival;
    if (i > 0 && trace[i].arrival < trace[i - 1].arrival) {
      if (trace[i - 1].arrival - trace[i].arrival > tolerance) {
        throw Error("measured run: request " + std::to_string(i) + " was sent " +
                    std::to_string(to_seconds(trace[i - 1].arrival - trace[i].arrival)) +
                    " s before the one listed before it; the run's requests must be in the order they were sent");
      }
      trace[i].arrival = trace[i - 1].arrival;
    }
    if (m.outcome == Outcome::finished && m.output_tokens > 0) trace[i].output_len = m.output_tokens;
  }
  return trace;
}

}  // namespace twin
