#include "metrics/prom_text.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <system_error>
#include <unordered_set>

#include "base/error.hpp"

namespace twin {
namespace {

bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }
bool blank(char c) { return c == ' ' || c == '\t'; }

// One line's reader: a cursor and the FILE:LINE every error names.
class LineReader {
 public:
  LineReader(std::string_view line, const std::string& source, std::int64_t number)
      : line_(line), source_(source), number_(number) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(source_ + ":" + std::to_string(number_) + ": " + what + " (line: " + excerpt(line_, 120) + ")");
  }
  void skip_blanks() {
    while (at_ < line_.size() && blank(line_[at_])) ++at_;
  }
  bool done() const { return at_ >= line_.size(); }
  char peek() const { return at_ < line_.size() ? line_[at_] : '\0'; }

  std::string name(bool allow_colon) {
    const std::size_t start = at_;
    if (at_ >= line_.size() || !name_start(line_[at_]) || (!allow_colon && line_[at_] == ':')) fail("expected a name");
    while (at_ < line_.size() && name_char(line_[at_]) && (allow_colon || line_[at_] != ':')) ++at_;
    return std::string(line_.substr(start, at_ - start));
  }

  // `"..."` with the format's three escapes.
  std::string quoted() {
    if (peek() != '"') fail("expected '\"' opening a label value");
    ++at_;
    std::string out;
    while (at_ < line_.size() && line_[at_] != '"') {
      char c = line_[at_++];
      if (c == '\\') {
        if (at_ >= line_.size()) break;
        const char e = line_[at_++];
        if (e == 'n') c = '\n';
        else if (e == '\\' || e == '"') c = e;
        else fail(std::string("unknown escape '\\") + e + "' in a label value");
      }
      out += c;
    }
    if (at_ >= line_.size()) fail("a label value without its closing '\"'");
    ++at_;
    return out;
  }

  void labels(PromSample& s, std::size_t max_labels) {
    ++at_;  // '{'
    for (;;) {
      skip_blanks();
      if (peek() == '}') break;
      if (s.labels.size() >= max_labels) fail("more than " + std::to_string(max_labels) + " labels");
      std::string key = name(false);
      skip_blanks();
      if (peek() != '=') fail("expected '=' after label " + excerpt(key, 80));
      ++at_;
      skip_blanks();
      for (const auto& kv : s.labels)
        if (kv.first == key) fail("label " + excerpt(key, 80) + " given twice");
      s.labels.emplace_back(std::move(key), quoted());
      skip_blanks();
      if (peek() == ',') {
        ++at_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}' in the label set");
      break;
    }
    ++at_;  // '}'
  }

  std::string_view token() {
    const std::size_t start = at_;
    while (at_ < line_.size() && !blank(line_[at_])) ++at_;
    return line_.substr(start, at_ - start);
  }

  double value() {
    const std::string_view t = token();
    if (t.empty()) fail("a sample without a value");
    if (t == "+Inf" || t == "Inf" || t == "+inf" || t == "inf") return std::numeric_limits<double>::infinity();
    if (t == "-Inf" || t == "-inf") return -std::numeric_limits<double>::infinity();
    if (t == "NaN" || t == "nan") return std::numeric_limits<double>::quiet_NaN();
    double v = 0;
    const char* first = t.data();
    if (*first == '+') ++first;
    const auto [end, ec] = std::from_chars(first, t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size()) fail("'" + excerpt(t, 40) + "' is not a number");
    return v;
  }

  void timestamp() {
    const std::string_view t = token();
    std::int64_t ms = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), ms);
    if (ec != std::errc() || end != t.data() + t.size()) fail("'" + excerpt(t, 40) + "' is not a timestamp (integer ms)");
  }

 private:
  std::string_view line_;
  const std::string& source_;
  std::int64_t number_;
  std::size_t at_ = 0;
};

PromSample parse_sample(std::string_view line, const std::string& source, std::int64_t number, const PromLimits& limits) {
  LineReader r(line, source, number);
  PromSample s;
  s.line = number;
  s.name = r.name(true);
  if (r.peek() == '{') r.labels(s, limits.max_labels);
  if (!r.done() && !blank(r.peek())) r.fail("expected a blank after the metric name or labels");
  r.skip_blanks();
  s.value = r.value();
  r.skip_blanks();
  if (!r.done()) r.timestamp();
  r.skip_blanks();
  if (!r.done()) r.fail("text after the timestamp");
  return s;
}

// The series' identity within a scrape: name and labels.
std::string series_key(const PromSample& s) {
  std::string key = s.name;
  for (const auto& [k, v] : s.labels) {
    key += '\x1f';
    key += k;
    key += '\x1e';
    key += v;
  }
  return key;
}

// The line of `text` starting at `at` (without its '\n') and `at` moved
// past it; false at the end of the text.
bool next_line(std::string_view text, std::size_t& at, std::string_view& line) {
  if (at >= text.size()) return false;
  std::size_t end = text.find('\n', at);
  if (end == std::string_view::npos) end = text.size();
  line = text.substr(at, end - at);
  at = end + 1;
  return true;
}

}  // namespace

const std::string* PromSample::label(std::string_view key) const {
  for (const auto& kv : labels)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

std::vector<PromScrape> parse_prom_text(std::string_view text, const std::string& source, const PromLimits& limits) {
  std::vector<PromScrape> scrapes;
  std::unordered_set<std::string> seen;  // the current scrape's series
  std::size_t total = 0;
  bool open = false;
  std::int64_t number = 0;
  std::size_t at = 0;
  std::string_view line;
  while (next_line(text, at, line)) {
    ++number;
    if (line.size() > limits.max_line_bytes) {
      throw Error(source + ":" + std::to_string(number) + ": a line of " + std::to_string(line.size()) +
                  " bytes, more than " + std::to_string(limits.max_line_bytes) + ": not a metrics exposition?");
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t first = 0;
    while (first < line.size() && blank(line[first])) ++first;
    line.remove_prefix(first);
    if (line.empty()) continue;
    if (line.front() == '#') {
      if (line == "# EOF") open = false;  // OpenMetrics: this scrape ends here
      continue;
    }
    PromSample s = parse_sample(line, source, number, limits);
    const std::string key = series_key(s);
    if (!open || seen.count(key) > 0) {
      scrapes.push_back(PromScrape{source, number, {}});
      seen.clear();
      open = true;
    }
    seen.insert(key);
    if (++total > limits.max_samples) {
      throw Error(source + ":" + std::to_string(number) + ": more than " + std::to_string(limits.max_samples) +
                  " samples: split the scrapes into a folder of files");
    }
    scrapes.back().samples.push_back(std::move(s));
  }
  return scrapes;
}

std::vector<PromScrape> read_prom_file(const std::filesystem::path& file, const PromLimits& limits) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) throw Error(file.string() + ": cannot read (" + ec.message() + ")");
  if (size > limits.max_file_bytes) {
    throw Error(file.string() + ": " + std::to_string(size) + " bytes, more than the " +
                std::to_string(limits.max_file_bytes) + " a metrics file may have");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open");
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) throw Error(file.string() + ": read failed");
  return parse_prom_text(text, file.string(), limits);
}

bool looks_like_prom_text(std::string_view text) {
  std::size_t at = 0;
  std::string_view line;
  while (next_line(text, at, line)) {
    while (!line.empty() && (blank(line.front()) || line.front() == '\r')) line.remove_prefix(1);
    while (!line.empty() && (blank(line.back()) || line.back() == '\r')) line.remove_suffix(1);
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) return true;
    if (line.front() == '#') continue;  // another comment
    try {
      parse_sample(line, "", 0, PromLimits{});
      return true;
    } catch (const Error&) {
      return false;
    }
  }
  return false;
}

}  // namespace twin
