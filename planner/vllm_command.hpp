#pragma once
// The `vllm serve` command line of a planned deployment: what to type to run
// the chosen candidate on vLLM, from the replica configuration the
// simulator served (the preset and overrides resolved, the model's context
// as max_model_len), so the plan ends in something a user can deploy.
#include <string>

#include "planner/search_space.hpp"

namespace twin {

// One replica's command, e.g. "vllm serve meta-llama/Llama-3.1-8B
// --tensor-parallel-size 2 ...". Presets vLLM has no switch for (orca,
// static, dynamic, lightllm) get the nearest command and a note saying
// what differs. Throws what build_cluster throws.
std::string vllm_serve_command(const Candidate& candidate);

}  // namespace twin
