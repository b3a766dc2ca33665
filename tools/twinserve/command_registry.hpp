#pragma once
// Each subcommand lives in its own file and registers itself here, so adding
// a subcommand touches no other file.
#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace twin::cli {

using CommandInstaller = std::function<void(CLI::App& root)>;

struct CommandEntry {
  std::string name;
  CommandInstaller install;
};

std::vector<CommandEntry>& command_registry();

// Every registered subcommand on `app`, in name order: the tree main()
// parses with (and tests/tools/flag_registry_test.cpp walks).
void install_commands(CLI::App& app);

struct RegisterCommand {
  RegisterCommand(std::string name, CommandInstaller install) {
    command_registry().push_back({std::move(name), std::move(install)});
  }
};

}  // namespace twin::cli
