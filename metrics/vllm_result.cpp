#include "metrics/vllm_result.hpp"

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <ostream>

#include "metrics/summary_json.hpp"

namespace twin {

std::string vllm_result_date() {
  std::time_t when = std::time(nullptr);
  std::tm parts{};
  const char* epoch = std::getenv("SOURCE_DATE_EPOCH");
  char* end = nullptr;
  errno = 0;
  const long long fixed = epoch ? std::strtoll(epoch, &end, 10) : -1;
  if (epoch && *epoch != '\0' && *end == '\0' && errno == 0 && fixed >= 0) {
    when = static_cast<std::time_t>(fixed);
    gmtime_r(&when, &parts);
  } else {
    localtime_r(&when, &parts);
  }
  char text[32] = {};
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &parts);
  return text;
}

nlohmann::ordered_json vllm_result_json(const Summary& s, const VllmResultContext& c) {
  using Json = nlohmann::ordered_json;
  Json j;
  j["date"] = c.date.empty() ? vllm_result_date() : c.date;
  j["backend"] = "twinserve";
  j["endpoint_type"] = "twinserve";
  j["label"] = c.label;
  j["model_id"] = c.model_id;
  j["tokenizer_id"] = c.model_id;
  j["num_prompts"] = s.num_requests;
  j["request_rate"] = s.offered_rate > 0 ? json_figure(s.offered_rate) : Json(nullptr);
  j["burstiness"] = nullptr;
  j["max_concurrency"] = nullptr;
  j["duration"] = json_figure(s.duration_s);
  j["completed"] = s.completed;
  j["failed"] = s.rejected + s.aborted;
  j["total_input_tokens"] = s.total_input_tokens;
  j["total_output_tokens"] = s.total_output_tokens;
  j["request_throughput"] = json_figure(s.request_throughput);
  j["request_goodput"] = s.slos.empty() ? Json(nullptr) : json_figure(s.goodput);
  j["output_throughput"] = json_figure(s.output_throughput);
  j["total_token_throughput"] = json_figure(s.total_token_throughput);
  j["max_output_tokens_per_s"] = s.max_output_tokens_per_s;
  j["max_concurrent_requests"] = s.max_concurrent_requests;
  const auto metric = [&](const char* name, const LatencyStats& m) {
    const std::string suffix = std::string(name) + "_ms";
    j["mean_" + suffix] = json_figure(m.mean);
    j["median_" + suffix] = json_figure(m.p50);
    j["std_" + suffix] = json_figure(m.std);
    j["p90_" + suffix] = json_figure(m.p90);
    j["p99_" + suffix] = json_figure(m.p99);
  };
  metric("ttft", s.ttft_ms);
  metric("tpot", s.tpot_ms);
  metric("itl", s.itl_ms);
  metric("e2el", s.e2el_ms);
  // twinserve's keys beside vLLM's (issue 44): the run's energy when priced.
  if (s.energy.known) {
    j["energy_j"] = json_figure(static_cast<double>(s.energy.total_uj) * 1e-6);
    j["average_power_w"] = json_figure(s.energy.average_power_w);
    j["joules_per_output_token"] = json_figure(s.energy.joules_per_output_token);
  }
  return j;
}

void write_vllm_result(std::ostream& out, const Summary& summary, const VllmResultContext& context) {
  out << vllm_result_json(summary, context).dump(2) << '\n';
}

}  // namespace twin
