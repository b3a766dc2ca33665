#include "traces/trace_format.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <initializer_list>
#include <set>
#include <utility>

#include "base/error.hpp"

namespace twin {

namespace {

constexpr std::array<std::pair<TraceFormat, std::string_view>, 11> kNames{{
    {TraceFormat::azure, "azure"},
    {TraceFormat::burstgpt, "burstgpt"},
    {TraceFormat::mooncake, "mooncake"},
    {TraceFormat::bailian, "bailian"},
    {TraceFormat::vidur, "vidur"},
    {TraceFormat::vidur_lengths, "vidur-lengths"},
    {TraceFormat::splitwise, "splitwise"},
    {TraceFormat::llmservingsim, "llmservingsim"},
    {TraceFormat::sharegpt, "sharegpt"},
    {TraceFormat::twin_jsonl, "twin-jsonl"},
    {TraceFormat::twin_csv, "twin-csv"},
}};

// What recognises a format: columns (CSV) or top-level keys (JSON), compared
// case-insensitively, as the files spell them.
struct Signature {
  TraceFormat format;
  bool json;
  std::initializer_list<std::string_view> required;
};

// The fewest names that tell the formats apart: a row missing another
// field the format needs is then reported by name, on its line.
const std::array<Signature, 12> kSignatures{{
    {TraceFormat::azure, false, {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}},
    {TraceFormat::burstgpt, false, {"Timestamp", "Request tokens", "Response tokens"}},
    {TraceFormat::vidur, false, {"arrived_at", "num_prefill_tokens", "num_decode_tokens"}},
    {TraceFormat::vidur_lengths, false, {"num_prefill_tokens", "num_decode_tokens"}},
    {TraceFormat::splitwise, false, {"arrival_timestamp", "prompt_size", "token_size"}},
    {TraceFormat::twin_csv, false, {"id", "arrival_s"}},
    {TraceFormat::mooncake, true, {"timestamp", "input_length"}},
    {TraceFormat::bailian, true, {"chat_id", "timestamp", "input_length"}},
    {TraceFormat::llmservingsim, true, {"input_toks", "output_toks"}},
    {TraceFormat::sharegpt, true, {"conversations"}},
    {TraceFormat::sharegpt, true, {"messages"}},
    {TraceFormat::twin_jsonl, true, {"id", "arrival_s"}},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Header names, trimmed of blanks and quotes, lower case.
std::set<std::string> csv_columns(std::string_view line) {
  std::set<std::string> names;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t comma = line.find(',', pos);
    std::string_view name = line.substr(pos, comma == std::string_view::npos ? line.npos : comma - pos);
    while (!name.empty() && (name.front() == ' ' || name.front() == '"')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '"')) name.remove_suffix(1);
    names.insert(lower(name));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return names;
}

// Top-level keys of a JSON object, lower case; values are skipped.
struct KeySax : nlohmann::json_sax<nlohmann::json> {
  std::set<std::string>& keys;
  int depth = 0;
  explicit KeySax(std::set<std::string>& k) : keys(k) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth < 64; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return ++depth < 64; }
  bool end_array() override { return --depth, true; }
  bool key(string_t& k) override {
    if (depth == 1) keys.insert(lower(k));
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

std::set<std::string> json_keys(std::string_view line) {
  std::set<std::string> keys;
  KeySax sax(keys);
  if (!nlohmann::json::sax_parse(line.begin(), line.end(), &sax)) {
    // A malformed first record still names its format by the keys it
    // spells, so the row error (FILE:1: invalid JSON) is the one reported.
    keys.clear();
    for (const auto& sig : kSignatures) {
      if (!sig.json) continue;
      for (std::string_view k : sig.required) {
        std::string spelled(1, '"');
        spelled.append(k);
        spelled.push_back('"');
        if (line.find(spelled) != std::string_view::npos) keys.insert(lower(k));
      }
    }
  }
  return keys;
}

}  // namespace

std::string_view format_name(TraceFormat format) {
  for (const auto& [f, name] : kNames)
    if (f == format) return name;
  return "auto";
}

std::string known_format_names() {
  std::string out = "auto";
  for (const auto& entry : kNames) {
    out += ", ";
    out += entry.second;
  }
  return out;
}

std::string format_signatures() {
  std::string out;
  TraceFormat previous = TraceFormat::auto_detect;
  for (const auto& sig : kSignatures) {
    if (sig.format == previous) {
      out.back() = ' ';
      out += "or ";
    } else {
      if (!out.empty()) out += ", ";
      out += format_name(sig.format);
      out += " (";
      if (sig.format == TraceFormat::sharegpt) out += "a JSON array, or ";
    }
    previous = sig.format;
    bool first = true;
    for (std::string_view k : sig.required) {
      if (!first) out += ",";
      first = false;
      out += k;
    }
    out += ")";
  }
  return out;
}

TraceFormat parse_format_name(std::string_view name) {
  if (name == "auto") return TraceFormat::auto_detect;
  for (const auto& [f, n] : kNames)
    if (n == name) return f;
  throw UsageError("unknown trace format '" + std::string(name) + "' (known: " + known_format_names() +
                   ")");
}

bool is_json_format(TraceFormat f) {
  return f == TraceFormat::mooncake || f == TraceFormat::bailian || f == TraceFormat::llmservingsim ||
         f == TraceFormat::sharegpt || f == TraceFormat::twin_jsonl;
}

bool is_length_only(TraceFormat f) { return f == TraceFormat::vidur_lengths || f == TraceFormat::sharegpt; }

TraceFormat detect_format(std::string_view line) {
  // Skip a UTF-8 byte order mark and leading blanks.
  if (line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  if (line.empty()) return TraceFormat::auto_detect;
  // A JSON array of conversations: ShareGPT's own files.
  if (line.front() == '[') return TraceFormat::sharegpt;
  const bool json = line.front() == '{';
  const std::set<std::string> names = json ? json_keys(line) : csv_columns(line);
  TraceFormat best = TraceFormat::auto_detect;
  std::size_t best_size = 0;
  for (const auto& sig : kSignatures) {
    if (sig.json != json) continue;
    bool all = true;
    for (std::string_view k : sig.required) all = all && names.count(lower(k)) > 0;
    if (all && sig.required.size() > best_size) {
      best = sig.format;
      best_size = sig.required.size();
    }
  }
  return best;
}

}  // namespace twin
