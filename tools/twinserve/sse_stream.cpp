#include "tools/twinserve/sse_stream.hpp"

#include "base/error.hpp"

namespace twin::cli {

void SseParser::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const std::size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      if (partial_.size() + bytes.size() > max_line_) {
        throw Error("server-sent events: a line longer than " + std::to_string(max_line_) + " bytes");
      }
      partial_.append(bytes);
      return;
    }
    std::string_view piece = bytes.substr(0, nl);
    bytes.remove_prefix(nl + 1);
    if (partial_.empty()) {
      line(piece);
    } else {
      partial_.append(piece);
      const std::string whole = std::move(partial_);
      partial_.clear();
      line(whole);
    }
  }
}

void SseParser::finish() {
  if (!partial_.empty()) {
    const std::string whole = std::move(partial_);
    partial_.clear();
    line(whole);
  }
  line("");
}

void SseParser::line(std::string_view text) {
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.empty()) {  // the event ends
    if (has_data_) {
      const std::string data = std::move(data_);
      data_.clear();
      has_data_ = false;
      on_event_(data);
    }
    return;
  }
  if (text.front() == ':') return;  // a comment (keep-alive ping)
  const std::size_t colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  if (field != "data") return;  // event:, id:, retry: mean nothing to a completion stream
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

}  // namespace twin::cli
