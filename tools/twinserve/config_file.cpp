#include "tools/twinserve/config_file.hpp"

#include <CLI/CLI.hpp>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"

namespace twin::cli {
namespace {

std::string at(const std::string& path, const YAML::Mark& mark) { return path + ":" + std::to_string(mark.line + 1); }

bool is_one_of(const std::string& s, std::initializer_list<const char*> words) {
  return std::any_of(words.begin(), words.end(), [&](const char* w) { return s == w; });
}

// A plain scalar as YAML 1.2's core schema types it: what a JSON flag's
// value becomes (`num_speculative_tokens: 3` a number, `"3"` a string).
nlohmann::json scalar_json(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: a string as written
  if (is_one_of(s, {"true", "True", "TRUE"})) return true;
  if (is_one_of(s, {"false", "False", "FALSE"})) return false;
  if (is_one_of(s, {"", "~", "null", "Null", "NULL"})) return nullptr;
  std::int64_t i = 0;
  if (auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i); ec == std::errc() && end == s.data() + s.size()) {
    return i;
  }
  double d = 0;
  if (auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d); ec == std::errc() && end == s.data() + s.size()) {
    return d;
  }
  return s;
}

// A key given twice in a map is refused at PATH:LINE: yaml-cpp keeps both
// entries, and the JSON object would keep the last silently.
nlohmann::json to_json(const std::string& path, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& kv : node) {
        const std::string key = kv.first.as<std::string>();
        if (j.contains(key)) throw UsageError(at(path, kv.first.Mark()) + ": key '" + excerpt(key) + "' given twice");
        j[key] = to_json(path, kv.second);
      }
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& item : node) j.push_back(to_json(path, item));
      return j;
    }
    case YAML::NodeType::Scalar:
      return scalar_json(node);
    default:
      return nullptr;
  }
}

// One value as a flag takes it on the command line.
std::string flag_value(const std::string& path, const std::string& key, const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsMap()) {  // a JSON flag (speculative-config)
    try {
      return to_json(path, node).dump();
    } catch (const nlohmann::json::type_error&) {
      throw UsageError(at(path, node.Mark()) + ": key '" + excerpt(key) + "': text that is not valid UTF-8");
    }
  }
  throw UsageError(at(path, node.Mark()) + ": key '" + excerpt(key) + "': a list in a list (a flag takes scalars)");
}

// Aliases share one node in yaml-cpp's graph, but whatever walks a value
// (to_json, the flag values) expands them: a recursive alias (`a: &a` then
// `b: *a` inside it) never ends, and nine aliases of nine aliases make 10^9
// values from 400 bytes. The graph is walked once with a budget first.
constexpr std::size_t kMaxYamlValues = 100000;
constexpr std::size_t kMaxYamlDepth = 64;
constexpr std::size_t kMaxYamlBytes = std::size_t{1} << 20;

void check_yaml_graph(const std::string& path, const YAML::Node& node, std::vector<YAML::Node>& open,
                      std::size_t& values) {
  for (const YAML::Node& up : open) {
    if (up.is(node)) throw UsageError(at(path, node.Mark()) + ": a recursive alias (an alias inside the value it names)");
  }
  if (++values > kMaxYamlValues) {
    throw UsageError(at(path, node.Mark()) + ": aliases expand the file to more than " +
                     std::to_string(kMaxYamlValues) + " values");
  }
  if (!node.IsMap() && !node.IsSequence()) return;
  if (open.size() >= kMaxYamlDepth) {
    throw UsageError(at(path, node.Mark()) + ": nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  }
  open.push_back(node);
  for (const auto& item : node) {
    if (node.IsMap()) {
      check_yaml_graph(path, item.first, open, values);
      check_yaml_graph(path, item.second, open, values);
    } else {
      check_yaml_graph(path, item, open, values);
    }
  }
  open.pop_back();
}

// The file's text, at most kMaxYamlBytes (read in pieces: a FIFO or a
// device has no size to check first).
std::string read_yaml_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UsageError(path + ": a directory, not a config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot read the config file");
  std::string text;
  std::vector<char> chunk(std::size_t{1} << 16);
  while (in && text.size() <= kMaxYamlBytes) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw UsageError(path + ": read error");
  if (text.size() > kMaxYamlBytes) {
    throw UsageError(path + ": more than the " + std::to_string(kMaxYamlBytes) + " bytes allowed for a config file");
  }
  return text;
}

// Counts documents and where each starts. yaml-cpp 0.7's LoadAll loops
// for ever (adding a null document each turn, memory growing) on a token
// its parser cannot place, such as a ',' outside [ ] or { } (yaml-cpp
// issue 1040, fixed upstream in 1.0's PR 1319): the documents are counted
// here, two at most, and the text loaded with Load, which reads one.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  std::vector<YAML::Mark> starts;
};

void check_one_document(const std::string& path, const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  for (int docs = 0; docs < 2 && parser.HandleNextDocument(counter); ++docs) {
  }
  if (counter.starts.size() < 2) return;
  const YAML::Mark& first = counter.starts[0];
  const YAML::Mark& second = counter.starts[1];
  if (second.pos == first.pos) {  // no progress: the parser is stuck on a token
    throw UsageError(at(path, second) + ":" + std::to_string(second.column + 1) +
                     ": not valid YAML: a token out of place (a ',' outside [ ] or { }?)");
  }
  throw UsageError(at(path, second) + ": a second YAML document (a config file holds one map)");
}

// The one document of the file, its alias graph checked.
YAML::Node load_yaml(const std::string& path) {
  const std::string text = read_yaml_text(path);
  YAML::Node root;
  try {
    check_one_document(path, text);
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(at(path, e.mark) + ":" + std::to_string(e.mark.column + 1) + ": not valid YAML: " + excerpt(e.msg));
  }
  std::vector<YAML::Node> open;
  std::size_t values = 0;
  check_yaml_graph(path, root, open, values);
  return root;
}

}  // namespace

bool is_yaml_path(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto ends_with = [&](const std::string& suffix) {
    return lower.size() > suffix.size() && lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".yaml") || ends_with(".yml");
}

namespace {

// The flags of a loaded file (load_yaml), in file order.
std::vector<YamlFlag> yaml_flags(const std::string& path, const YAML::Node& root) {
  std::vector<YamlFlag> flags;
  if (!root.IsDefined() || root.IsNull()) return flags;  // empty, or comments only
  if (!root.IsMap()) {
    throw UsageError(at(path, root.Mark()) + ": expected a map of flag names to values (max-num-seqs: 64), not a " +
                     (root.IsSequence() ? "list" : "single value"));
  }
  std::map<std::string, int> first_line;  // flag -> line, for keys given twice
  for (const auto& kv : root) {
    const int line = kv.first.Mark().line + 1;
    if (!kv.first.IsScalar()) throw UsageError(path + ":" + std::to_string(line) + ": a key must be a flag name");
    YamlFlag f;
    f.key = kv.first.Scalar();
    f.line = line;
    std::string name = f.key;
    std::replace(name.begin(), name.end(), '_', '-');
    f.flag = "--" + name;
    if (name.empty() || name.front() == '-') {
      throw UsageError(path + ":" + std::to_string(line) + ": key '" + excerpt(f.key) +
                       "': write the flag's name without dashes (max-num-seqs, not --max-num-seqs)");
    }
    if (auto [it, fresh] = first_line.emplace(f.flag, line); !fresh) {
      throw UsageError(path + ":" + std::to_string(line) + ": key '" + excerpt(f.key) + "' given twice (first on line " +
                       std::to_string(it->second) + ")");
    }
    const YAML::Node& value = kv.second;
    if (value.IsNull()) {
      throw UsageError(path + ":" + std::to_string(line) + ": key '" + excerpt(f.key) + "' has no value (a switch takes true or false)");
    }
    if (value.IsSequence()) {
      for (const auto& item : value) f.values.push_back(flag_value(path, f.key, item));
      if (f.values.empty()) throw UsageError(path + ":" + std::to_string(line) + ": key '" + excerpt(f.key) + "': an empty list");
    } else {
      f.values.push_back(flag_value(path, f.key, value));
    }
    flags.push_back(std::move(f));
  }
  return flags;
}

}  // namespace

std::vector<YamlFlag> read_yaml_flags(const std::string& path) {
  try {
    return yaml_flags(path, load_yaml(path));
  } catch (const YAML::Exception& e) {  // a conversion of a value the walk let through
    throw UsageError(at(path, e.mark) + ": " + excerpt(e.msg));
  }
}

void apply_yaml_flags(CLI::App& sub, const std::string& path, const std::vector<YamlFlag>& flags) {
  for (const YamlFlag& f : flags) {
    const std::string where = path + ":" + std::to_string(f.line) + ": ";
    CLI::Option* op = sub.get_option_no_throw(f.flag);
    if (op == nullptr || op == sub.get_help_ptr() || op == sub.get_help_all_ptr()) {
      throw UsageError(where + "unknown key '" + excerpt(f.key) + "': `twinserve " + sub.get_name() + "` has no " + excerpt(f.flag));
    }
    if (!op->get_configurable()) throw UsageError(where + "key '" + excerpt(f.key) + "': a config file cannot name " + excerpt(f.flag));
    if (!op->empty()) continue;  // given on the command line, which wins
    try {
      if (op->get_expected_min() == 0) {  // a switch
        if (f.values.size() != 1) throw UsageError("a switch takes one value, true or false");
        op->add_result(op->get_flag_value(f.flag.substr(2), f.values.front()));
      } else {
        op->add_result(f.values);
      }
      op->run_callback();
    } catch (const std::exception& e) {
      throw UsageError(where + "key '" + excerpt(f.key) + "': " + excerpt(e.what(), 400));
    }
  }
}

void add_config_file_flag(CLI::App& sub, std::string* cluster_config, const std::string& cluster_help) {
  CLI::App* app = &sub;
  std::string help =
      "Flags from a YAML file, vLLM's --config: keys are the long flag names without dashes "
      "(max-num-seqs: 64); flags on the command line override it";
  if (cluster_config != nullptr) {
    // Registered before --config, so its value is in place when --config's
    // callback runs and the two can be checked against each other.
    sub.add_option("--cluster-config", *cluster_config, cluster_help);
    help += ". A file not ending in .yaml/.yml is the cluster config JSON, as --cluster-config";
  }
  sub.add_option_function<std::string>(
         "--config",
         [app, cluster_config](const std::string& path) {
           if (is_yaml_path(path)) {
             apply_yaml_flags(*app, path, read_yaml_flags(path));
             return;
           }
           if (cluster_config == nullptr) {
             throw UsageError("--config " + path + ": expected a YAML file of flags (.yaml or .yml)");
           }
           if (!cluster_config->empty() && *cluster_config != path) {
             throw UsageError("--config " + path + " and --cluster-config " + *cluster_config +
                              ": two cluster configs (name a YAML file of flags with --config)");
           }
           *cluster_config = path;
         },
         help)
      ->configurable(false);
}

}  // namespace twin::cli
