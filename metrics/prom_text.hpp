#pragma once
// A reader of Prometheus' text exposition format (version 0.0.4, what
// vLLM's and SGLang's /metrics and our serve's send; OpenMetrics' `# EOF`
// is taken as a scrape's end): the samples of one or more scrapes, with
// their labels. No Debian C++ library parses the format (prometheus-cpp
// only writes it), so this is a small strict reader: every malformed line
// is an error naming FILE:LINE, and the input is bounded (line length,
// labels per sample, samples, file size) so a hostile file costs bounded
// memory and time.
//
// Several scrapes in one text: `curl .../metrics >> scrapes.prom` in a
// loop appends whole expositions. A scrape ends at `# EOF`, or where a
// series (name and labels) repeats: the format forbids one series twice in
// an exposition, so a repeat can only be the next scrape's.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace twin {

struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in the order written
  double value = 0;
  std::int64_t line = 0;  // 1-based, in its file

  // The label's value, or nullptr when the sample has no such label.
  const std::string* label(std::string_view key) const;
};

struct PromScrape {
  std::string source;  // FILE
  std::int64_t first_line = 0;
  std::vector<PromSample> samples;
};

struct PromLimits {
  std::size_t max_line_bytes = 64 * 1024;
  std::size_t max_labels = 64;
  std::size_t max_samples = 4'000'000;  // over all scrapes
  std::uintmax_t max_file_bytes = 1ull << 30;
};

// Errors (twin::Error) name `source`:LINE and what is wrong.
std::vector<PromScrape> parse_prom_text(std::string_view text, const std::string& source, const PromLimits& limits = {});

// A file's scrapes; the file's size is checked against the limit first.
std::vector<PromScrape> read_prom_file(const std::filesystem::path& file, const PromLimits& limits = {});

// Whether `text` opens like an exposition: its first line that is not blank
// is `# HELP`, `# TYPE` or a sample `name[{...}] value`.
bool looks_like_prom_text(std::string_view text);

}  // namespace twin
