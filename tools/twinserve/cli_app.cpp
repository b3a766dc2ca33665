#include "tools/twinserve/cli_app.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/short_aliases.hpp"

namespace twin::cli {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

void install_commands(CLI::App& app) {
  auto& registry = command_registry();
  std::sort(registry.begin(), registry.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& entry : registry) entry.install(app);
}

void parse_words(CLI::App& app, std::vector<std::string> words) {
  // vLLM's -tp/-pp/-dp become their long names first (CLI11 cannot name
  // them); CLI11 then parses the rewritten words as it would argv.
  words = expand_short_aliases(app, std::move(words));
  std::reverse(words.begin(), words.end());  // CLI11's vector form takes the words last first
  app.parse(words);
}

}  // namespace twin::cli
