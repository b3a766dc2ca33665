// twinserve: the command line front end. Exit codes: 0 ok, 2 usage error,
// 1 runtime error.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/short_aliases.hpp"

namespace twin::cli {
std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}
}  // namespace twin::cli

int main(int argc, char** argv) {
  CLI::App app{"twinserve: a digital twin of an LLM serving cluster.\n"
               "One serving core runs in a real inference engine and in a discrete-event\n"
               "simulator, so predictions can be checked against live runs."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "twinserve 0.1");

  auto& registry = twin::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& entry : registry) entry.install(app);

  try {
    // vLLM's -tp/-pp/-dp become their long names first (CLI11 cannot name
    // them); CLI11 then parses the rewritten words as it would argv.
    std::vector<std::string> words =
        twin::cli::expand_short_aliases(app, std::vector<std::string>(argv + 1, argv + argc));
    std::reverse(words.begin(), words.end());  // CLI11's vector form takes the words last first
    app.name(argv[0]);                         // as parse(argc, argv) names it, for the usage lines
    app.parse(words);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const twin::cli::Interrupted& e) {
    std::cerr << "twinserve: " << e.what() << "\n";
    return 128 + e.signal;
  } catch (const twin::UsageError& e) {
    std::cerr << "twinserve: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "twinserve: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
