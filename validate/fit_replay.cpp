#include "validate/fit_replay.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <unordered_map>

#include "base/error.hpp"
#include "hwprofiles/hardware_writer.hpp"
#include "validate/fit_scrape.hpp"
#include "validate/sim_serve.hpp"

namespace twin {

std::vector<RequestRecord> replay_run(const FitRun& run, const FitProfile& profile, const FitOptions& options) {
  // The cluster resolves its hardware by name or file: the candidate goes
  // through the profile format itself, as a user's --hw fitted.json (or
  // --profile fitted.json) would.
  const std::filesystem::path file = options.scratch / "candidate.json";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << hardware_json(profile.hw).dump(2) << "\n";
    if (!out) throw Error(file.string() + ": write failed");
  }
  const std::filesystem::path calibrated = options.scratch / "candidate-calibrated.json";
  if (profile.calibrated) write_calibrated_profile(calibrated.string(), *profile.calibrated);
  ClusterConfig cluster = options.cluster;
  if (cluster.groups.empty()) cluster.groups.emplace_back();
  for (ReplicaGroupConfig& g : cluster.groups) {
    g.hardware = file.string();
    g.profile = profile.calibrated ? calibrated.string() : std::string();
  }
  RunRecords records = simulate_requests(cluster, run.requests, "", false, "fitted");
  std::unordered_map<RequestId, std::size_t> index;
  for (std::size_t i = 0; i < records.requests.size(); ++i) index.emplace(records.requests[i].id, i);
  std::vector<RequestRecord> out(run.requests.size());
  for (std::size_t i = 0; i < run.requests.size(); ++i) {
    const auto it = index.find(run.requests[i].id);
    if (it != index.end()) out[i] = std::move(records.requests[it->second]);
    else out[i].outcome = Outcome::rejected;
  }
  return out;
}

double metric_ms(const RequestRecord& r, int metric) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (r.outcome != Outcome::finished || r.first_token == kNoTime || r.finish == kNoTime) return nan;
  switch (metric) {
    case kTtft: return static_cast<double>(r.first_token - r.arrival) / 1e6;
    case kTpot:
      return r.output_tokens > 1 ? static_cast<double>(r.finish - r.first_token) / 1e6 / (r.output_tokens - 1) : nan;
    default: return static_cast<double>(r.finish - r.arrival) / 1e6;
  }
}

std::vector<ResidualSlot> residual_slots(const std::vector<FitRun>& runs) {
  std::vector<ResidualSlot> slots;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const FitRun& run = runs[k];
    if (run.scrape) {
      add_scrape_slots(k, run, slots);
      continue;
    }
    std::vector<std::size_t> order(run.requests.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return run.requests[a].arrival < run.requests[b].arrival; });
    for (int m = 0; m < 3; ++m) {
      ResidualSlot slot{k, {}, {}, m, 0};
      double sum = 0;
      auto close = [&] {
        if (slot.requests.empty() || !(sum > 0)) return;
        slot.measured_ms = sum / static_cast<double>(slot.requests.size());
        slots.push_back(slot);
      };
      for (const std::size_t i : order) {
        const double v = run.scored[i] ? metric_ms(run.measured[i], m) : std::nan("");
        if (!std::isfinite(v) || v <= 0) continue;  // a zero measured time has no relative error
        slot.requests.push_back(i);
        slot.measured_each.push_back(v);
        sum += v;
        if (slot.requests.size() == kFitBin) {
          close();
          slot.requests.clear();
          slot.measured_each.clear();
          sum = 0;
        }
      }
      close();
    }
  }
  return slots;
}

std::vector<double> relative_residuals(const std::vector<ResidualSlot>& slots,
                                       const std::vector<std::vector<RequestRecord>>& predicted) {
  std::vector<double> z(slots.size());
  for (std::size_t s = 0; s < slots.size(); ++s) {
    const ResidualSlot& slot = slots[s];
    if (slot.ranked) {
      std::int64_t missing = 0;
      const double mean = ranked_slot_mean(slot, predicted[slot.run], missing);
      const double n = static_cast<double>(slot.rank_hi - slot.rank_lo);
      // Ranks the simulation did not reach count as twice the measured mean.
      const double all = std::isfinite(mean) ? (mean * (n - static_cast<double>(missing)) + 2 * slot.measured_ms * static_cast<double>(missing)) / n
                                             : 2 * slot.measured_ms;
      z[s] = (all - slot.measured_ms) / slot.measured_ms;
      continue;
    }
    double sum = 0;
    for (std::size_t j = 0; j < slot.requests.size(); ++j) {
      const double p = metric_ms(predicted[slot.run][slot.requests[j]], slot.metric);
      sum += std::isfinite(p) ? p : 2 * slot.measured_each[j];
    }
    const double mean = sum / static_cast<double>(slot.requests.size());
    z[s] = std::isfinite(mean) ? (mean - slot.measured_ms) / slot.measured_ms : 1.0;
  }
  return z;
}

double fit_loss(const std::vector<ResidualSlot>& slots, const std::vector<double>& residuals) {
  constexpr double kScale = 0.1;
  double sum[3] = {0, 0, 0};
  double count[3] = {0, 0, 0};
  for (std::size_t s = 0; s < slots.size(); ++s) {
    const double u = residuals[s] / kScale;
    sum[slots[s].metric] += 2 * kScale * kScale * (std::sqrt(1 + u * u) - 1);
    count[slots[s].metric] += 1;
  }
  double loss = 0;
  for (int m = 0; m < 3; ++m)
    if (count[m] > 0) loss += sum[m] / count[m];
  return loss;
}

}  // namespace twin
