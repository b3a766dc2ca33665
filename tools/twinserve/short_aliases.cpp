#include "tools/twinserve/short_aliases.hpp"

#include <CLI/CLI.hpp>

#include "base/error.hpp"

namespace twin::cli {

const std::vector<ShortAlias>& short_aliases() {
  static const std::vector<ShortAlias> table = {
      {"-tp", "--tensor-parallel-size"},
      {"-pp", "--pipeline-parallel-size"},
      {"-dp", "--data-parallel-size"},
  };
  return table;
}

namespace {

const ShortAlias* find_alias(const std::string& word) {
  for (const ShortAlias& a : short_aliases()) {
    const std::string alias = a.alias;
    if (word == alias || word.rfind(alias + "=", 0) == 0) return &a;
  }
  return nullptr;
}

// The subcommand of app the word names (CLI11 2.1 has no non-throwing lookup).
const CLI::App* find_subcommand(const CLI::App& app, const std::string& word) {
  if (word.empty() || word[0] == '-') return nullptr;
  const auto subs = app.get_subcommands([&word](const CLI::App* sub) { return sub->check_name(word); });
  return subs.empty() ? nullptr : subs.front();
}

std::string command_path(const CLI::App& app) {
  std::string path;
  for (const CLI::App* at = &app; at != nullptr && at->get_parent() != nullptr; at = at->get_parent()) {
    path = at->get_name() + (path.empty() ? "" : " " + path);
  }
  return path.empty() ? "twinserve" : path;
}

}  // namespace

std::vector<std::string> expand_short_aliases(const CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> out;
  out.reserve(args.size());
  const CLI::App* command = &app;
  for (const std::string& word : args) {
    if (word == "--") {  // the rest are positionals, as CLI11 reads them
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(out.size()), args.end());
      return out;
    }
    if (const CLI::App* sub = find_subcommand(*command, word); sub != nullptr) {
      command = sub;
      out.push_back(word);
      continue;
    }
    const ShortAlias* alias = find_alias(word);
    if (alias == nullptr) {
      out.push_back(word);
      continue;
    }
    if (command->get_option_no_throw(alias->long_name) == nullptr) {
      throw UsageError(std::string(alias->alias) + " (vLLM's " + alias->long_name + "): `" + command_path(*command) +
                       "` has no " + alias->long_name);
    }
    out.push_back(alias->long_name + word.substr(std::string(alias->alias).size()));
  }
  return out;
}

}  // namespace twin::cli
