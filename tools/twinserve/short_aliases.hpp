#pragma once
// vLLM's multi-letter single-dash aliases (-tp, -pp, -dp). CLI11 takes only
// one letter after a single dash, so main() rewrites these words to their
// long names before parsing, for the subcommand that has the long name.
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace twin::cli {

struct ShortAlias {
  const char* alias;      // "-tp"
  const char* long_name;  // "--tensor-parallel-size"
};

// The one table of aliases main() rewrites.
const std::vector<ShortAlias>& short_aliases();

// args (argv without the program name) with each alias word ("-tp" or
// "-tp=N") replaced by its long name. The subcommand is found by walking
// app's subcommands through args; an alias that subcommand has no long name
// for is a UsageError naming both, so it cannot be misread as short flags
// (-t -p).
std::vector<std::string> expand_short_aliases(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace twin::cli
