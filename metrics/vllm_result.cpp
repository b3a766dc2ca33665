#include "metrics/vllm_result.hpp"

#include <ostream>

#include "metrics/summary_json.hpp"

namespace twin {

nlohmann::ordered_json vllm_result_json(const Summary& s, const VllmResultContext& c) {
  using Json = nlohmann::ordered_json;
  Json j;
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
  return j;
}

void write_vllm_result(std::ostream& out, const Summary& summary, const VllmResultContext& context) {
  out << vllm_result_json(summary, context).dump(2) << '\n';
}

}  // namespace twin
