#pragma once
// Server-sent events as an OpenAI-compatible server streams them: bytes
// arrive in pieces of any size, an event is its `data:` lines (joined by
// '\n') ended by a blank line; `\r\n` line ends, comment lines (`:` ping)
// and other fields (event:, id:, retry:) are accepted and ignored. Memory
// is bounded: a line longer than the limit is an error, not a growing buffer.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace twin::cli {

class SseParser {
 public:
  using EventHandler = std::function<void(const std::string& data)>;
  explicit SseParser(EventHandler on_event, std::size_t max_line_bytes = 16 << 20)
      : on_event_(std::move(on_event)), max_line_(max_line_bytes) {}

  // Feeds bytes; calls the handler for each event they complete. Throws
  // twin::Error for a line past the limit.
  void feed(std::string_view bytes);
  // The stream ended: an event left without its blank line is delivered.
  void finish();

 private:
  void line(std::string_view text);
  EventHandler on_event_;
  std::size_t max_line_;
  std::string partial_;  // the current line so far
  std::string data_;     // the current event's data
  bool has_data_ = false;
};

}  // namespace twin::cli
