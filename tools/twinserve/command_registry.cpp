#include "tools/twinserve/command_registry.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

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

}  // namespace twin::cli
