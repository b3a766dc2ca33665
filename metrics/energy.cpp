#include "metrics/energy.hpp"

#include <algorithm>
#include <cmath>

namespace twin {

EnergySummary summarize_energy(const StepTally& steps, const EnergyContext& context, Time first_arrival,
                               Time last_finish, std::uint64_t output_tokens, std::uint64_t completed) {
  EnergySummary e;
  if (!context.unknown.empty()) {
    e.unknown_reason = context.unknown;
    return e;
  }
  if (steps.energy_steps != steps.steps) {
    e.unknown_reason = std::to_string(steps.steps - steps.energy_steps) + " of " + std::to_string(steps.steps) +
                       " steps were priced without an energy";
    return e;
  }
  if (first_arrival == kNoTime) {
    e.unknown_reason = "no request arrived";
    return e;
  }
  const Time end = std::max(context.end, last_finish == kNoTime ? first_arrival : last_finish);
  const Time window = std::max<Time>(0, end - first_arrival);
  e.known = true;
  e.window_s = to_seconds(window);
  e.steps_uj = steps.energy_uj;
  // The devices' idle draw over the window, less what their busy time would
  // have drawn idle (the steps' energy holds that time). Steps back to back
  // leave none; the per-step rounding of the baseline could make that a few
  // microjoules below zero (printed "-0.0"), so it is held at zero.
  e.idle_uj = std::max<std::int64_t>(
      0, std::llround(context.idle_power_w * static_cast<double>(window) * 1e-3) - steps.idle_baseline_uj);
  e.total_uj = e.steps_uj + e.idle_uj;
  const double joules = static_cast<double>(e.total_uj) * 1e-6;
  e.average_power_w = e.window_s > 0 ? joules / e.window_s : 0;
  e.joules_per_output_token = output_tokens > 0 ? joules / static_cast<double>(output_tokens) : 0;
  e.joules_per_request = completed > 0 ? joules / static_cast<double>(completed) : 0;
  e.kwh = joules / 3.6e6;
  if (output_tokens > 0 && context.price_per_hour > 0) {
    e.cost_per_m_output_tokens = context.price_per_hour * e.window_s / 3600.0 / static_cast<double>(output_tokens) * 1e6;
  }
  const double per_m = output_tokens > 0 ? 1e6 / static_cast<double>(output_tokens) : 0;
  e.energy_price_per_kwh = context.energy_price_per_kwh;
  e.energy_cost = e.kwh * context.energy_price_per_kwh;
  e.energy_cost_per_m_output_tokens = e.energy_cost * per_m;
  e.carbon_g_per_kwh = context.carbon_g_per_kwh;
  e.co2_g = e.kwh * context.carbon_g_per_kwh;
  e.co2_g_per_m_output_tokens = e.co2_g * per_m;
  return e;
}

}  // namespace twin
