#include <cmath>

#include "metrics/summary_json.hpp"
#include "validate/report.hpp"

namespace twin {
namespace {

using Json = nlohmann::ordered_json;

Json num(double v) { return json_figure(v); }

}  // namespace

Json metric_comparison_json(const std::vector<MetricComparison>& metrics) {
  Json out = Json::object();
  for (const MetricComparison& m : metrics) {
    if (m.stat == "value") {
      out[m.metric] = Json{{"measured", num(m.measured)}, {"predicted", num(m.predicted)}, {"error_pct", num(m.error_pct)}};
      continue;
    }
    Json& metric = out[m.metric];
    metric["measured"][m.stat] = num(m.measured);
    metric["predicted"][m.stat] = num(m.predicted);
    metric["error_pct"][m.stat] = num(m.error_pct);
  }
  return out;
}

Json request_errors_json(const std::vector<RequestErrorStats>& errors) {
  Json req = Json::object();
  for (const RequestErrorStats& e : errors) {
    req[e.metric] = Json{{"count", e.count}, {"p10", num(e.p10)}, {"p50", num(e.p50)}, {"p90", num(e.p90)},
                         {"mean_abs", num(e.mean_abs)}};
  }
  return req;
}

namespace {

Json model_details(const ModelResult& m) {
  Json out;
  out["per_request_error_pct"] = request_errors_json(m.request_errors);
  Json steps = Json::array();
  for (const CompositionError& c : m.step_errors) {
    Json j;
    j["composition"] = std::string(composition_name(c.composition));
    j["steps"] = c.steps;
    j["measured_ms_mean"] = num(c.measured_ms_mean);
    j["predicted_ms_mean"] = num(c.predicted_ms_mean);
    j["error_pct"] = num(c.error_pct_of_total);
    j["mean_abs_error_pct"] = num(c.mean_abs_error_pct);
    j["p50_error_pct"] = num(c.p50_error_pct);
    j["p90_abs_error_pct"] = num(c.p90_abs_error_pct);
    Json ops = Json::object();
    for (int k = 0; k < kNumOpKinds; ++k) {
      if (c.op_ms_mean[k] > 0) ops[std::string(op_name(static_cast<OpKind>(k)))] = num(c.op_ms_mean[k]);
    }
    j["predicted_op_ms_mean"] = std::move(ops);
    steps.push_back(std::move(j));
  }
  out["step_time_error"] = std::move(steps);
  if (!m.op_errors.empty()) {
    Json ops = Json::array();
    for (const OpTimeError& e : m.op_errors) {
      ops.push_back(Json{{"op", e.op},
                         {"measured_ms_per_step", num(e.measured_ms)},
                         {"predicted_ms_per_step", num(e.predicted_ms)},
                         {"error_pct", num(e.error_pct)}});
    }
    out["op_time_error"] = std::move(ops);
  }
  return out;
}

}  // namespace

namespace {

// Issue 44: the engine's measured energy (RAPL, NVML) beside each model's
// prediction; either side says why it is not known rather than a 0.
Json energy_comparison_json(const LoadResult& l) {
  Json j;
  const std::optional<MeasuredEnergy>& m = l.engine.summary.measured_energy;
  j["measured"] = m ? measured_energy_json(*m) : Json{{"known", false}, {"reason", "the engine run read no counter"}};
  Json predicted;
  for (const ModelResult& model : l.models) {
    const EnergySummary& e = model.run.summary.energy;
    Json p;
    p["known"] = e.known;
    if (!e.known) {
      p["reason"] = e.unknown_reason;
    } else {
      p["energy_j"] = num(static_cast<double>(e.total_uj) * 1e-6);
      p["joules_per_output_token"] = num(e.joules_per_output_token);
      if (m && m->known && m->joules > 0) p["error_pct"] = num((static_cast<double>(e.total_uj) * 1e-6 / m->joules - 1) * 100);
    }
    predicted[model.name] = std::move(p);
  }
  j["predicted"] = std::move(predicted);
  return j;
}

}  // namespace

nlohmann::ordered_json report_json(const ValidationResult& r) {
  Json out;
  out["model"] = r.model;
  out["profile"] = r.profile;
  out["trace"] = r.trace;
  out["requests"] = r.requests;
  out["trace_rate_rps"] = num(r.trace_rate_rps);
  out["capacity_rps"] = num(r.capacity_rps);
  out["engine"] = r.engine_description;
  out["roofline_hardware"] = r.roofline_hardware;
  if (const std::string caveat = r.roofline_caveat(); !caveat.empty()) out["roofline_caveat"] = caveat;
  out["replay_parity_exact"] = r.parity_exact();
  Json loads = Json::array();
  for (const LoadResult& l : r.loads) {
    Json j;
    j["load"] = num(l.load);
    j["rate_rps"] = num(l.rate_rps);
    j["folder"] = l.folder;
    const ModelResult& predicted = l.models.front();
    // Named, not iterated as temporaries: items() of a temporary would dangle.
    const Json metrics = metric_comparison_json(predicted.metrics);
    for (const auto& [key, value] : metrics.items()) j[key] = value;
    if (l.parity_error.empty()) {
      j["replay_parity_max_abs_ns"] = l.parity.max_abs_ns;
    } else {
      j["replay_parity_max_abs_ns"] = nullptr;
    }
    j["replay_parity_mismatched_requests"] = l.parity.mismatched;
    if (!l.parity_error.empty() || !l.parity.first_mismatch.empty()) {
      j["replay_parity_error"] = l.parity_error.empty() ? l.parity.first_mismatch : l.parity_error;
    }
    const Json details = model_details(predicted);
    for (const auto& [key, value] : details.items()) j[key] = value;
    j["engine_steps"] = l.engine.steps.size();
    j["energy"] = energy_comparison_json(l);
    if (!l.engine_repeats.empty()) {
      Json runs = Json::array();
      for (const auto& repeat : l.engine_repeats) runs.push_back(metric_comparison_json(repeat));
      j["engine_repeats"] = std::move(runs);
    }
    for (std::size_t m = 1; m < l.models.size(); ++m) {
      Json other = metric_comparison_json(l.models[m].metrics);
      const Json other_details = model_details(l.models[m]);
      for (const auto& [key, value] : other_details.items()) other[key] = value;
      j[l.models[m].name] = std::move(other);
    }
    loads.push_back(std::move(j));
  }
  out["loads"] = std::move(loads);
  // Ctrl-C: the loads above are the ones finished; the folder of the load
  // whose engine run was stopped, or "" if none was.
  if (r.interrupted) out["interrupted"] = *r.interrupted;
  return out;
}

}  // namespace twin
