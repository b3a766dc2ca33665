// One spelling per concept across the command line: walks every subcommand
// of the tree main() parses with (install_commands) and fails when a flag of
// the registry (tools/twinserve/flag_registry.hpp) is spelled, typed or
// described differently somewhere, when a flag shared by two commands
// differs between them, or when a flag's name is written in two places of
// tools/twinserve/ (a concept registered twice). Each rule is also shown to
// fail on a deliberately broken command tree or source.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"

namespace {

using twin::cli::flag_table;
using twin::cli::kRefusedFlagHelp;

// Commands whose flags name other things than the same words elsewhere, and
// why; the rules skip them.
bool exempt(const std::string& command, const std::string& name) {
  // `trace convert/generate` write traces: their --rate, --sessions, --seed,
  // --format, --max-requests... describe the trace written, not a run.
  if (command.rfind("trace ", 0) == 0) return true;
  // calibrate's --out is the profile file it writes, not a results folder.
  if (command == "calibrate" && (name == "--out" || name == "--overwrite")) return true;
  return false;
}

struct Seen {
  std::string command, names, type, help;
};

std::string names_of(const CLI::Option& opt) {
  std::vector<std::string> names;
  for (const auto& n : opt.get_lnames()) names.push_back("--" + n);
  for (const auto& n : opt.get_snames()) names.push_back("-" + n);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::string sorted_names(const std::string& cli11_names) {
  std::vector<std::string> names;
  std::stringstream in(cli11_names);
  for (std::string n; std::getline(in, n, ',');) names.push_back(n);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

void collect(const CLI::App& app, const std::string& path, std::vector<Seen>& out) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt == app.get_help_ptr() || opt == app.get_help_all_ptr() || opt->get_lnames().empty()) continue;
    // The value's type without the checks a command adds ("INT:INT in [1 - 8]" -> "INT"; a switch: "").
    const std::string type = opt->get_type_name();
    out.push_back({path, names_of(*opt), type.substr(0, type.find(':')), opt->get_description()});
  }
  for (const CLI::App* sub : app.get_subcommands({})) {
    collect(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
  }
}

std::vector<std::string> split_names(const std::string& names) {
  std::vector<std::string> out;
  std::stringstream in(names);
  for (std::string n; std::getline(in, n, ',');) out.push_back(n);
  return out;
}

// Rule 1: a registry name is spelled as its row says, its help starts with
// the row's, and it takes the same type of value wherever it is taken.
// Rule 2: any other long name two commands share (a flag group's, e.g.
// --trace, whose help the command words) has the same names and type in both.
std::vector<std::string> tree_problems(const CLI::App& root) {
  std::vector<Seen> all;
  collect(root, "", all);
  std::map<std::string, std::size_t> row_of;  // each registry name -> its row
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < flag_table().size(); ++i) {
    for (const std::string& n : split_names(flag_table()[i].names)) {
      if (!row_of.emplace(n, i).second) problems.push_back(n + ": in two registry rows");
    }
  }
  std::map<std::string, Seen> first;        // long name -> where it was first seen
  std::map<std::size_t, Seen> first_typed;  // registry row -> first accepted use
  for (const Seen& s : all) {
    const std::vector<std::string> names = split_names(s.names);
    const std::string& key = names.back().rfind("--", 0) == 0 ? names.back() : names.front();
    if (exempt(s.command, key)) continue;
    std::size_t row = flag_table().size();
    for (const std::string& n : names) {
      if (row_of.count(n)) row = row_of[n];
    }
    if (row < flag_table().size()) {
      const twin::cli::FlagSpec& spec = flag_table()[row];
      const bool refused = s.help.rfind(kRefusedFlagHelp, 0) == 0;
      if (s.names != sorted_names(spec.names)) {
        problems.push_back(s.command + ": " + s.names + " is the registry's " + spec.names + " spelled otherwise");
      }
      if (!refused && s.help.rfind(spec.help, 0) != 0) {
        problems.push_back(s.command + ": " + s.names + ": help does not start with the registry's");
      }
      if (refused) continue;
      auto [at, fresh] = first_typed.emplace(row, s);
      if (!fresh && at->second.type != s.type) {
        problems.push_back(spec.names + ": type " + s.type + " in `" + s.command + "`, " + at->second.type + " in `" +
                           at->second.command + "`");
      }
      continue;
    }
    for (const std::string& n : names) {
      if (n.rfind("--", 0) != 0) continue;
      auto [at, fresh] = first.emplace(n, s);
      if (fresh || at->second.command == s.command) continue;
      const Seen& f = at->second;
      if (f.names != s.names || f.type != s.type) {
        problems.push_back(n + ": `" + f.command + "` (" + f.names + " " + f.type + ") and `" + s.command + "` (" +
                           s.names + " " + s.type + ") differ: one concept, one registry row");
      }
    }
  }
  return problems;
}

// Rule 3: a flag name written as a literal in an add_option/add_flag call is
// written once in all the files (registry rows are not such calls, and a
// registry name is never written as one). Files: name -> text.
std::vector<std::string> source_problems(const std::map<std::string, std::string>& files) {
  std::set<std::string> registry;
  for (const auto& row : flag_table()) {
    for (const std::string& n : split_names(row.names)) registry.insert(n);
  }
  const std::regex call(R"re(add_(?:option|flag)\(\s*"([^"]+)")re");
  std::map<std::string, std::string> where;
  std::vector<std::string> problems;
  for (const auto& [file, text] : files) {
    // trace_cmd.cpp: the trace tools' own flags (see exempt()).
    if (file == "trace_cmd.cpp") continue;
    const bool calibrate = file == "calibrate_cmd.cpp";
    for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
      for (const std::string& n : split_names((*it)[1].str())) {
        if (n.rfind("--", 0) != 0 || (calibrate && exempt("calibrate", n))) continue;
        if (registry.count(n)) problems.push_back(file + ": " + n + " written out; it is a registry row (add_flag)");
        auto [at, fresh] = where.emplace(n, file);
        if (!fresh) problems.push_back(n + ": registered in " + at->second + " and again in " + file);
      }
    }
  }
  return problems;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

TEST_CASE("every command spells each concept as the flag registry does") {
  CLI::App root{"twinserve"};
  twin::cli::install_commands(root);
  REQUIRE(root.get_subcommands({}).size() >= 10);
  const std::vector<std::string> problems = tree_problems(root);
  INFO(joined(problems));
  CHECK(problems.empty());
}

TEST_CASE("no flag name is registered in two places of tools/twinserve") {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TWIN_SOURCE_DIR) + "/tools/twinserve")) {
    if (entry.path().extension() != ".cpp") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    files[entry.path().filename().string()] = text.str();
  }
  REQUIRE(files.size() >= 10);
  const std::vector<std::string> problems = source_problems(files);
  INFO(joined(problems));
  CHECK(problems.empty());
}

TEST_CASE("the registry's rules fail on a broken command tree and source") {
  CLI::App root{"t"};
  int seed = 0, tp = 0;
  std::string a, b;
  auto* one = root.add_subcommand("one");
  auto* two = root.add_subcommand("two");
  twin::cli::add_flag(*one, twin::cli::FlagId::seed, seed);
  two->add_option("--seed,-s", a, "Seed");  // the registry's concept: spelled, described and typed otherwise
  one->add_option("--tp", tp, "GPUs");       // a registry alias alone
  one->add_option("--thing", a, "A thing");
  two->add_option("--thing,-t", b, "A thing");  // one name, two sets of aliases
  const std::vector<std::string> problems = tree_problems(root);
  INFO(joined(problems));
  // --seed,-s: names, help and type; --tp: names and help; --thing: aliases.
  CHECK(problems.size() == 6);
  // A flag written out twice, and a registry name written out.
  const std::vector<std::string> source = source_problems(
      {{"a_cmd.cpp", R"(sub->add_option("--thing", x, "...");)"},
       {"b_cmd.cpp", R"(sub->add_flag("--thing,-t", y, "..."); sub->add_option("--seed", s, "");)"}});
  INFO(joined(source));
  CHECK(source.size() == 2);
}
