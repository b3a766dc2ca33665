#pragma once
// The command line as a value: every registered command installed on an
// app, and a word list parsed the way main() parses argv. main() and the
// Python module (python/) both go through here, so a keyword argument of
// twinserve.simulate is the command's own flag, parsed by the same code.
#include <string>
#include <vector>

#include "tools/twinserve/command_registry.hpp"  // install_commands

namespace twin::cli {

// Parses (and so runs) `words`, argv without the program's name: vLLM's
// short aliases (-tp, -pp, -dp) rewritten first. Throws CLI11's ParseError
// for flags, twin::UsageError / twin::Error as the command does.
void parse_words(CLI::App& app, std::vector<std::string> words);

}  // namespace twin::cli
