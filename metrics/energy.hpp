#pragma once
// The energy of a run (issue 44; docs/outputs.md, "Energy"): the steps'
// energy as the clock priced it (sim/virtual_clock.hpp) plus every device's
// idle draw over the rest of the run, and what follows from it per token,
// per request and per dollar. Plain arithmetic on integer microjoules, so
// the parts add up to the total exactly.
#include <cstdint>
#include <string>

#include "base/types.hpp"
#include "engine/core/records.hpp"

namespace twin {

// What the caller knows of the cluster's power.
struct EnergyContext {
  // Why the energy cannot be known (a profile without power figures, a cost
  // model that does not split steps, the engine); empty: known.
  std::string unknown = "no power model priced this run (the engine does not measure energy)";
  double idle_power_w = 0;    // every device of the cluster idle, together
  double price_per_hour = 0;  // every device of the cluster, $/h (0: no price)
  Time end = 0;               // the run's last event (the idle draw runs to it)
  // What a kWh costs and emits (--energy-price $/kWh, --carbon-intensity
  // g/kWh); 0: not given, and the summary leaves those figures out.
  double energy_price_per_kwh = 0;
  double carbon_g_per_kwh = 0;
};

struct EnergySummary {
  bool known = false;
  std::string unknown_reason;  // when not known
  std::int64_t total_uj = 0, steps_uj = 0, idle_uj = 0;
  double window_s = 0;         // first arrival to the run's end
  double average_power_w = 0;  // total over the window
  double joules_per_output_token = 0, joules_per_request = 0;  // completed requests
  double kwh = 0;
  // The cluster's price over the window, per million output tokens (0 without a price).
  double cost_per_m_output_tokens = 0;
  // The electricity at --energy-price and its CO2 at --carbon-intensity
  // (0 and absent from the outputs when not given).
  double energy_price_per_kwh = 0, energy_cost = 0, energy_cost_per_m_output_tokens = 0;
  double carbon_g_per_kwh = 0, co2_g = 0, co2_g_per_m_output_tokens = 0;
};

// Energy an engine run measured on its device's own counter (RAPL, NVML;
// engine/runtime/energy_meter.hpp), beside the prediction. Not known: the
// reason, never a 0.
struct MeasuredEnergy {
  bool known = false;
  std::string reason;  // when not known
  std::string source;  // e.g. "RAPL (1 package domain(s))"
  double joules = 0, wall_s = 0, average_power_w = 0;
  double joules_per_output_token = 0;  // set by the summary (completed requests' output tokens)
};

// `first_arrival` and `last_finish` as the collector saw them (kNoTime: none).
EnergySummary summarize_energy(const StepTally& steps, const EnergyContext& context, Time first_arrival,
                               Time last_finish, std::uint64_t output_tokens, std::uint64_t completed);

}  // namespace twin
