#include "traces/trace_format.hpp"

#include <array>
#include <utility>

#include "base/error.hpp"

namespace twin {

namespace {

constexpr std::array<std::pair<TraceFormat, std::string_view>, 7> kNames{{
    {TraceFormat::azure, "azure"},
    {TraceFormat::burstgpt, "burstgpt"},
    {TraceFormat::mooncake, "mooncake"},
    {TraceFormat::bailian, "bailian"},
    {TraceFormat::vidur, "vidur"},
    {TraceFormat::twin_jsonl, "twin-jsonl"},
    {TraceFormat::twin_csv, "twin-csv"},
}};

bool contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

bool starts_with_ci(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char a = text[i], b = prefix[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = static_cast<char>(b - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
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

TraceFormat parse_format_name(std::string_view name) {
  if (name == "auto") return TraceFormat::auto_detect;
  for (const auto& [f, n] : kNames)
    if (n == name) return f;
  throw UsageError("unknown trace format '" + std::string(name) + "' (known: " + known_format_names() +
                   ")");
}

TraceFormat detect_format(std::string_view line) {
  // Skip a UTF-8 byte order mark and leading blanks.
  if (line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  if (line.empty()) return TraceFormat::auto_detect;
  if (line.front() == '{') {
    if (contains(line, "\"arrival_s\"")) return TraceFormat::twin_jsonl;
    if (contains(line, "\"chat_id\"") && contains(line, "\"input_length\"")) return TraceFormat::bailian;
    if (contains(line, "\"input_length\"")) return TraceFormat::mooncake;
    return TraceFormat::auto_detect;
  }
  if (starts_with_ci(line, "TIMESTAMP,ContextTokens,GeneratedTokens")) return TraceFormat::azure;
  // BurstGPT releases differ in column order (later ones add Session ID and
  // Elapsed time), so look for its distinctive token columns.
  if (contains(line, "Request tokens") && contains(line, "Response tokens")) return TraceFormat::burstgpt;
  if (contains(line, "arrived_at") && contains(line, "num_prefill_tokens") &&
      contains(line, "num_decode_tokens"))
    return TraceFormat::vidur;
  if (starts_with_ci(line, "id,arrival_s,")) return TraceFormat::twin_csv;
  return TraceFormat::auto_detect;
}

}  // namespace twin
