#pragma once
// plan.html: the plan as one self-contained page a capacity planner reads at
// a glance (no scripts, fonts or links to fetch): the answer and its
// `vllm serve` line; per SLO, latency against offered load for every
// candidate with the threshold drawn; throughput per GPU against tokens/s
// per user (AIConfigurator's view) with its Pareto front; and the ranked
// table with the cost per million tokens at the trace's rate and at
// capacity. Drawn from the probes plan.json already holds.
#include <string>

#include "planner/planner.hpp"

namespace twin {

std::string plan_html(const PlanResult& plan);

}  // namespace twin
