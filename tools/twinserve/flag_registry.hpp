#pragma once
// THE flag registry: every concept that more than one command takes a flag
// for (the model, the hardware, the seed, the parallel layout, dtypes, the
// clients, ...) is one row of flag_table() (flag_registry.cpp): its names
// (vLLM's long name first where vLLM has the knob, then our short ones),
// its help and its check. Commands and flag groups (common_flags.hpp,
// client_flags.hpp, scheduler_flags.hpp) pick rows with add_flag(); a command
// that cannot use a concept says why with refuse_flag(), so the spelling is
// never merely "not expected".
//
// Adding a flag shared by two commands: one FlagId enumerator here and one
// row in flag_table(); then `add_flag(*sub, FlagId::x, args.x)` in each
// command. A `use` string appends what the value means in that command
// ("the sizes to try"); the row's help stays the first words everywhere.
// tests/tools/flag_registry_test.cpp walks every command's options and fails
// when one concept is spelled, typed or described two ways, or when a flag's
// name is written in two places of tools/twinserve/.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace twin::cli {

enum class FlagId {
  model,
  weights,
  hardware,
  profile,
  seed,
  quiet,
  overwrite,  // replace an output that exists (--out, a trace OUT, a profile)
  jobs,
  slo,
  // The parallel layout.
  tensor_parallel,
  pipeline_parallel,
  data_parallel,
  enable_expert_parallel,
  expert_parallel,
  // Precision.
  dtype,
  kv_cache_dtype,
  quantization,
  // Memory plan.
  max_model_len,
  gpu_memory_utilization,
  num_gpu_blocks_override,
  kv_offload_dram_gib,
  kv_offload_ssd_gib,
  // Scheduling and routing.
  scheduler,
  max_num_batched_tokens,
  max_num_seqs,
  router,
  // Clients (traces/clients.hpp).
  max_concurrency,
  request_rate,
  sessions,
  think_time_s,
  asap,
  // Outputs and the rest.
  result_format,
  speculative_config,
  eos_token,
  no_plots,
  no_steps,
  json,
  measured,  // runs measured on a deployment (validate, calibrate)
  // ---- energy (issue 44) ----
  energy_price,      // $/kWh
  carbon_intensity,  // g CO2/kWh
  max_power_kw,      // plan's power budget
  power_budget_w,    // the same in watts, kept for earlier scripts
  count_  // the number of rows; keep last
};

struct FlagSpec {
  FlagId id;
  std::string names;  // CLI11's form: "--tp,--tensor-parallel-size"
  std::string help;
  std::optional<CLI::Validator> check;  // applied wherever the flag is added
};

// The rows, in FlagId order.
const std::vector<FlagSpec>& flag_table();
const FlagSpec& flag_spec(FlagId id);
// The row's first long name ("--tensor-parallel-size"), for messages.
std::string flag_name(FlagId id);

// The help a command shows: the row's, then `use` after "; " when given.
std::string flag_help(FlagId id, const std::string& use);

// An option taking a value (a number, a text, an optional, or a vector: the
// caller sets ->delimiter(',') for a list).
template <class T>
CLI::Option* add_flag(CLI::App& sub, FlagId id, T& target, const std::string& use = "") {
  const FlagSpec& spec = flag_spec(id);
  CLI::Option* opt = sub.add_option(spec.names, target, flag_help(id, use));
  if (spec.check) opt->check(*spec.check);
  return opt;
}
// An on/off switch (no value).
CLI::Option* add_switch(CLI::App& sub, FlagId id, bool& target, const std::string& use = "");

// The help of a refused flag starts with this.
inline constexpr const char* kRefusedFlagHelp = "Not taken here: ";

// The flag's names on a command that cannot use the concept: giving it is a
// usage error that says `why`.
CLI::Option* refuse_flag(CLI::App& sub, FlagId id, const std::string& why);

}  // namespace twin::cli
