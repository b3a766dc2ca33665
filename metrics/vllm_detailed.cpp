#include "metrics/vllm_detailed.hpp"

#include <cmath>
#include <fstream>
#include <limits>

#include "base/error.hpp"
#include "metrics/summary_json.hpp"

namespace twin {
namespace {

using Json = nlohmann::json;

constexpr double kMaxSeconds = 1e8;       // a gap or latency: about three years
constexpr double kMaxStartSeconds = 4e9;  // a clock reading (perf_counter, or time.time() since 1970)

struct Reader {
  const std::string file;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(file + ": key \"" + key + "\": " + what);
  }
  [[noreturn]] void fail_at(const std::string& key, std::size_t i, const std::string& what) const {
    fail(key, "entry " + std::to_string(i) + ": " + what);
  }

  const Json& list(const Json& root, const std::string& key, bool required) const {
    static const Json none;
    const auto it = root.find(key);
    if (it == root.end()) {
      if (required) {
        fail(key, "missing: the per-request lists are written only by `vllm bench serve --save-result --save-detailed`"
                  " (or twinserve bench)");
      }
      return none;
    }
    if (!it->is_array()) fail(key, "expected a list, found " + std::string(it->type_name()));
    return *it;
  }

  double seconds(const Json& v, const std::string& key, std::size_t i) const {
    if (!v.is_number()) fail_at(key, i, "expected seconds (a number), found " + std::string(v.type_name()));
    const double s = v.get<double>();
    // Bounded so every time, in integer nanoseconds, stays far from overflow.
    if (!std::isfinite(s) || s < 0 || s > kMaxSeconds) fail_at(key, i, "expected seconds in [0, 1e8]");
    return s;
  }

  std::int32_t count(const Json& v, const std::string& key, std::size_t i) const {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
        v.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
      fail_at(key, i, "expected a token count (an integer >= 0), found " + excerpt(v.dump(), 40));
    }
    return static_cast<std::int32_t>(v.get<std::int64_t>());
  }
};

double to_ns_seconds(double s) { return std::round(s * 1e9) / 1e9; }  // written to the nanosecond

}  // namespace

VllmDetailedResult read_vllm_detailed(const std::filesystem::path& path) {
  const Reader r{path.string()};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(r.file + ": cannot open");
  Json root;
  try {
    root = Json::parse(in);
  } catch (const Json::exception& e) {
    throw Error(r.file + ": not JSON: " + excerpt(e.what(), 300));
  }
  if (!root.is_object()) throw Error(r.file + ": expected a JSON object (vllm bench serve --save-result)");

  const Json& input_lens = r.list(root, "input_lens", true);
  const Json& output_lens = r.list(root, "output_lens", true);
  const Json& ttfts = r.list(root, "ttfts", true);
  const Json& itls = r.list(root, "itls", true);
  const Json& errors = r.list(root, "errors", true);
  const Json& start_times = r.list(root, "start_times", false);
  const Json& latencies = r.list(root, "latencies", false);
  const std::size_t n = input_lens.size();
  if (n == 0) r.fail("input_lens", "empty: no requests");
  for (const auto& [key, l] : {std::pair<const char*, const Json*>{"output_lens", &output_lens}, {"ttfts", &ttfts},
                               {"itls", &itls}, {"errors", &errors}, {"start_times", &start_times},
                               {"latencies", &latencies}}) {
    if (!l->is_null() && l->size() != n) {
      r.fail(key, std::to_string(l->size()) + " entries, but input_lens has " + std::to_string(n));
    }
  }

  VllmDetailedResult out;
  out.has_start_times = !start_times.is_null();
  out.has_latencies = !latencies.is_null();
  out.requests.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    VllmRequestEntry& e = out.requests[i];
    e.input_len = r.count(input_lens[i], "input_lens", i);
    e.output_len = r.count(output_lens[i], "output_lens", i);
    if (errors[i].is_string()) {
      e.error = errors[i].get<std::string>();
    } else if (!errors[i].is_null()) {
      r.fail_at("errors", i, "expected a string (empty for a success), found " + std::string(errors[i].type_name()));
    }
    e.ttft_s = r.seconds(ttfts[i], "ttfts", i);
    if (!itls[i].is_array()) r.fail_at("itls", i, "expected a list of gaps, found " + std::string(itls[i].type_name()));
    e.itl_s.reserve(itls[i].size());
    for (const Json& gap : itls[i]) e.itl_s.push_back(r.seconds(gap, "itls", i));
    if (out.has_start_times) {
      if (!start_times[i].is_number() || !(std::abs(start_times[i].get<double>()) <= kMaxStartSeconds)) {
        r.fail_at("start_times", i, "expected the send time in seconds (a number of magnitude at most 4e9)");
      }
      e.start_time_s = start_times[i].get<double>();
    }
    if (out.has_latencies) e.latency_s = r.seconds(latencies[i], "latencies", i);
    if (e.error.empty() && e.output_len < 1) {
      r.fail_at("output_lens", i, "a request without an error has no output tokens");
    }
  }
  return out;
}

void add_vllm_detailed(nlohmann::ordered_json& result, const std::vector<VllmRequestEntry>& requests) {
  using OJson = nlohmann::ordered_json;
  OJson input_lens = OJson::array(), output_lens = OJson::array(), ttfts = OJson::array(), itls = OJson::array(),
        start_times = OJson::array(), latencies = OJson::array(), errors = OJson::array(), energies = OJson::array();
  bool any_energy = false;
  for (const VllmRequestEntry& e : requests) {
    any_energy = any_energy || e.energy_j.has_value();
    energies.push_back(e.energy_j ? json_figure(*e.energy_j) : OJson(nullptr));
    input_lens.push_back(e.input_len);
    output_lens.push_back(e.output_len);
    ttfts.push_back(to_ns_seconds(e.ttft_s));
    OJson gaps = OJson::array();
    for (const double g : e.itl_s) gaps.push_back(to_ns_seconds(g));
    itls.push_back(std::move(gaps));
    start_times.push_back(to_ns_seconds(e.start_time_s.value_or(0)));
    latencies.push_back(to_ns_seconds(e.latency_s.value_or(0)));
    errors.push_back(e.error);
  }
  result["input_lens"] = std::move(input_lens);
  result["output_lens"] = std::move(output_lens);
  result["ttfts"] = std::move(ttfts);
  result["itls"] = std::move(itls);
  result["latencies"] = std::move(latencies);
  result["start_times"] = std::move(start_times);
  result["errors"] = std::move(errors);
  if (any_energy) result["energies_j"] = std::move(energies);  // twinserve's key (issue 44)
}

VllmRequestEntry vllm_request_entry(const RequestRecord& r) {
  VllmRequestEntry e;
  e.input_len = r.prompt_tokens;
  e.start_time_s = to_seconds(r.arrival);
  if (r.energy_uj >= 0) e.energy_j = static_cast<double>(r.energy_uj) * 1e-6;
  if (r.outcome != Outcome::finished) {
    e.error = r.reason.empty() ? std::string(r.outcome == Outcome::rejected ? "rejected" : "aborted") : r.reason;
    return e;
  }
  e.output_len = r.output_tokens;
  e.ttft_s = to_seconds(r.first_token - r.arrival);
  e.itl_s.reserve(r.itl.size());
  for (const Time gap : r.itl) e.itl_s.push_back(to_seconds(gap));
  e.latency_s = to_seconds(r.finish - r.arrival);
  if (r.energy_uj >= 0) e.energy_j = static_cast<double>(r.energy_uj) * 1e-6;
  return e;
}

}  // namespace twin
