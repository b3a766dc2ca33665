// calibrate --measured's inputs: a RUN read into requests to replay and the
// records measured for them, and the checks that runs agree with the
// deployment and with each other (validate/measured_fit.hpp).
#include <algorithm>
#include <cctype>
#include <limits>
#include <system_error>

#include "base/error.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/vllm_detailed.hpp"
#include "models/json_fields.hpp"
#include "sim/cluster.hpp"
#include "validate/fit_scrape.hpp"
#include "validate/measured_fit.hpp"
#include "validate/measured_run.hpp"
#include "validate/trace_requests.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

// A `twinserve bench` folder: its vllm_result.json (with the gaps), else its requests.csv.
fs::path run_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    if (!fs::is_regular_file(path, ec)) throw UsageError("--measured " + path + ": no such file or folder");
    return path;
  }
  for (const char* name : {"vllm_result.json", "requests.csv"})
    if (fs::is_regular_file(fs::path(path) / name, ec)) return fs::path(path) / name;
  throw UsageError("--measured " + path + ": a folder without vllm_result.json or requests.csv (a `twinserve bench --out` folder has them)");
}

bool is_json(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".json";
}

// Without a trace: the file's own requests, each a distinct prompt of its
// measured length sent at its measured time.
std::vector<Request> requests_from_file(const fs::path& file) {
  std::vector<Request> out;
  if (is_json(file)) {
    const VllmDetailedResult d = read_vllm_detailed(file);
    if (!d.has_start_times) {
      throw UsageError(file.string() + ": no \"start_times\" (an older vLLM): give the trace the client played with --trace");
    }
    double first = std::numeric_limits<double>::infinity();
    for (const auto& e : d.requests) first = std::min(first, *e.start_time_s);
    for (std::size_t i = 0; i < d.requests.size(); ++i) {
      Request r;
      r.id = static_cast<RequestId>(i);
      r.arrival = from_seconds(*d.requests[i].start_time_s - first);
      r.prompt_len = std::max(1, d.requests[i].input_len);
      r.output_len = std::max(1, d.requests[i].output_len);
      out.push_back(std::move(r));
    }
    return out;
  }
  for (const RequestRecord& rec : read_request_records(file)) {
    Request r;
    r.id = rec.id;
    r.arrival = rec.arrival;
    r.prompt_len = std::max(1, rec.prompt_tokens);
    r.output_len = std::max(1, rec.output_tokens);
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const Request& a, const Request& b) { return a.id < b.id; });
  return out;
}

std::string model_id_of(const fs::path& file) {
  if (!is_json(file)) return "";
  const nlohmann::json j = read_json_file(file.string());
  const auto it = j.find("model_id");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// "meta-llama/Llama-3.1-8B-Instruct" -> "llama-3.1-8b-instruct".
std::string model_key(std::string s) {
  if (const auto slash = s.rfind('/'); slash != std::string::npos) s = s.substr(slash + 1);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool same_model(const std::string& a, const std::string& b) {
  const std::string x = model_key(a), y = model_key(b);
  return x.find(y) != std::string::npos || y.find(x) != std::string::npos;
}

}  // namespace

FitRun load_fit_run(const std::string& path, const std::string& trace, const TraceReadOptions& read,
                    std::int64_t max_requests) {
  if (is_scrape_path(path)) return load_scrape_fit_run(path, trace, read, max_requests);
  FitRun run;
  run.path = path;
  run.trace = trace;
  const fs::path file = run_file(path);
  std::vector<Request> requests = trace.empty() ? requests_from_file(file) : read_trace_requests(trace, read, max_requests);
  if (trace.empty() && max_requests > 0 && static_cast<std::int64_t>(requests.size()) > max_requests)
    requests.resize(static_cast<std::size_t>(max_requests));
  if (requests.empty()) throw Error(file.string() + ": no requests");
  const MeasuredRun measured = read_measured_run(file, requests);
  run.format = measured.format;
  run.model_id = model_id_of(file);
  if (measured.prompt_mismatches * 2 > static_cast<std::int64_t>(requests.size())) {
    throw UsageError(file.string() + ": key \"input_lens\": " + std::to_string(measured.prompt_mismatches) + " of " +
                     std::to_string(requests.size()) + " prompt lengths differ from the trace's (first: " +
                     measured.first_prompt_mismatch +
                     "): a run of another model or tokenizer, or of another trace?");
  }
  run.requests = measured_requests(std::move(requests), measured);
  run.measured = measured.records;
  const auto finished = std::count_if(run.measured.begin(), run.measured.end(),
                                      [](const RequestRecord& r) { return r.outcome == Outcome::finished; });
  if (finished == 0) throw Error(file.string() + ": no request finished: nothing to fit");
  run.scored.assign(run.requests.size(), 1);
  return run;
}

std::pair<std::string, std::string> split_run_trace(const std::string& run) {
  std::error_code ec;
  const std::size_t eq = run.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == run.size() || fs::exists(run, ec)) return {run, ""};
  return {run.substr(0, eq), run.substr(eq + 1)};
}

void check_fit_runs(const std::vector<FitRun>& runs, const ClusterConfig& cluster) {
  const Cluster built = build_cluster(cluster);
  const std::string& model = built.groups.front().config.model;
  const std::int64_t max_model_len = built.groups.front().replica.scheduler.max_model_len;
  const FitRun* named = nullptr;
  for (const FitRun& run : runs) {
    if (!run.model_id.empty()) {
      if (!model.empty() && model.find('/') == std::string::npos && !same_model(run.model_id, model)) {
        throw UsageError(run.path + ": " + run.model_key + ": the run served '" + run.model_id + "', the deployment is --model " +
                         model + ": a run of another model cannot calibrate this one");
      }
      if (named && !same_model(named->model_id, run.model_id)) {
        throw UsageError("contradicting runs: " + named->path + " served '" + named->model_id + "', " + run.path +
                         " served '" + run.model_id + "'; fit one deployment at a time");
      }
      named = &run;
    }
    if (max_model_len <= 0) continue;
    for (std::size_t i = 0; i < run.requests.size(); ++i) {
      const Request& r = run.requests[i];
      const bool finished = run.scrape || run.measured[i].outcome == Outcome::finished;
      if (finished && r.prompt_len + r.output_len > max_model_len) {
        throw UsageError(run.path + ": request " + std::to_string(i) + " (id " + std::to_string(r.id) + ") has " +
                         std::to_string(r.prompt_len) + " prompt + " + std::to_string(r.output_len) +
                         " output tokens, more than the deployment's max_model_len " + std::to_string(max_model_len) +
                         ": a run of another model or deployment?");
      }
    }
  }
}

void score_half(FitRun& run, bool first_half) {
  if (run.scrape) return score_scrape_half(run, first_half);
  Time lo = run.requests.front().arrival, hi = lo;
  for (const Request& r : run.requests) {
    lo = std::min(lo, r.arrival);
    hi = std::max(hi, r.arrival);
  }
  const Time mid = lo + (hi - lo) / 2;
  for (std::size_t i = 0; i < run.requests.size(); ++i) run.scored[i] = (run.requests[i].arrival < mid) == first_half;
}

}  // namespace twin
