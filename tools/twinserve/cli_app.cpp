#include "tools/twinserve/cli_app.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "tools/twinserve/short_aliases.hpp"

namespace twin::cli {

void parse_words(CLI::App& app, std::vector<std::string> words) {
  // vLLM's -tp/-pp/-dp become their long names first (CLI11 cannot name
  // them); CLI11 then parses the rewritten words as it would argv.
  words = expand_short_aliases(app, std::move(words));
  std::reverse(words.begin(), words.end());  // CLI11's vector form takes the words last first
  app.parse(words);
}

}  // namespace twin::cli
