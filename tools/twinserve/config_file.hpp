#pragma once
// --config FILE.yaml, vLLM's config file: a YAML map whose keys are the
// subcommand's long flag names without the dashes (`max-num-seqs: 64`, or
// `max_num_seqs`), each value what the flag takes (a list for a repeatable
// or comma-separated flag, true/false for a switch, a map for a JSON flag
// such as speculative-config). Flags given on the command line win over the
// file. simulate and sweep took a cluster config JSON as --config before
// this existed, and still do: a --config FILE not ending in .yaml or .yml
// is the cluster config (their --cluster-config).
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace twin::cli {

struct YamlFlag {
  std::string key;   // as written in the file
  std::string flag;  // the long flag it names: "--" + key with '_' as '-'
  std::vector<std::string> values;
  int line = 0;  // 1-based, in the file
};

// True for a name ending in .yaml or .yml (any case).
bool is_yaml_path(const std::string& path);

// The flags of the file at `path`, in file order. UsageError "PATH:LINE: ..."
// for YAML that does not parse, a top level that is not a map, a key given
// twice, a key without a value and a nested list.
std::vector<YamlFlag> read_yaml_flags(const std::string& path);

// Gives each of `flags` to the option of `sub` it names, unless the command
// line gave that option already; runs the option's checks. UsageError
// naming PATH:LINE and the key for a key `sub` has no flag for and for a
// value its flag refuses.
void apply_yaml_flags(CLI::App& sub, const std::string& path, const std::vector<YamlFlag>& flags);

// Registers --config on `sub`. `cluster_config` (simulate, sweep): the
// cluster config JSON, set by --cluster-config (registered here, with
// `cluster_help`) or by a --config that is not YAML; null: --config takes
// only YAML.
void add_config_file_flag(CLI::App& sub, std::string* cluster_config, const std::string& cluster_help = "");

}  // namespace twin::cli
