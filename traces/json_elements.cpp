#include "traces/json_elements.hpp"

#include "base/error.hpp"
#include "traces/line_reader.hpp"

namespace twin {

JsonElements::JsonElements(const std::string& path)
    : path_(path), source_(open_byte_source(path)), buffer_(1 << 20) {}

void JsonElements::fail(const std::string& problem) const {
  throw Error(path_ + ":" + std::to_string(line_) + ": " + problem);
}

int JsonElements::peek() {
  if (pos_ == end_) {
    if (eof_) return -1;
    end_ = source_->read(buffer_.data(), buffer_.size());
    pos_ = 0;
    if (end_ == 0) {
      eof_ = true;
      return -1;
    }
  }
  return static_cast<unsigned char>(buffer_[pos_]);
}

int JsonElements::get() {
  const int c = peek();
  if (c >= 0) {
    ++pos_;
    if (c == '\n') ++line_;
  }
  return c;
}

int JsonElements::skip_blanks() {
  for (;;) {
    const int c = peek();
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c;
    get();
  }
}

bool JsonElements::next(std::string_view& element) {
  if (finished_) return false;
  if (!started_) {
    started_ = true;
    // A UTF-8 byte order mark.
    if (peek() == 0xEF) {
      get();
      if (get() != 0xBB || get() != 0xBF) fail("expected a JSON array or objects");
    }
    if (skip_blanks() == '[') {
      get();
      in_array_ = true;
      if (skip_blanks() == ']') {
        get();
        finished_ = true;
      }
    }
  } else if (in_array_) {
    // After an element: ',' and the next, or ']' and the end.
    const int c = skip_blanks();
    if (c == ']') {
      get();
      finished_ = true;
    } else if (c == ',') {
      get();
      skip_blanks();
    } else {
      fail(c < 0 ? "the JSON array does not close (truncated file?)" : "expected ',' or ']' after an array element");
    }
  }
  if (finished_) {
    if (skip_blanks() >= 0) fail("unexpected data after the JSON array");
    return false;
  }
  const int first = skip_blanks();
  if (first < 0) {
    if (in_array_) fail("the JSON array does not close (truncated file?)");
    finished_ = true;
    return false;
  }
  if (first != '{') fail(in_array_ ? "expected an object as array element" : "expected a JSON object");
  // Copy one object, tracking strings and nesting; its own parser checks
  // the rest of the syntax.
  element_line_ = line_;
  element_.clear();
  int depth = 0;
  bool in_string = false, escaped = false;
  for (;;) {
    const int c = get();
    if (c < 0) fail("the JSON object starting on line " + std::to_string(element_line_) + " does not close");
    if (element_.size() >= kMaxLineBytes) fail("a JSON object longer than 256 MiB");
    element_.push_back(static_cast<char>(c));
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) break;
    }
  }
  element = element_;
  return true;
}

}  // namespace twin
