#pragma once
// Splits a JSON document into its top-level objects without parsing them:
// either a JSON array of objects (ShareGPT's own files, often one line of
// hundreds of megabytes) or objects one after another (JSONL). Only one
// object is held at a time, so memory stays flat whatever the file size.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "traces/byte_source.hpp"

namespace twin {

class JsonElements {
 public:
  // Throws twin::Error naming the path if it cannot be opened.
  explicit JsonElements(const std::string& path);

  // The next object's text (valid until the next call); false at the end.
  // Broken structure (an array that does not close, a stray character
  // between objects, an object larger than kMaxLineBytes) throws twin::Error
  // "FILE:LINE: problem".
  bool next(std::string_view& element);
  // 1-based line on which the last element started.
  std::int64_t line_number() const { return element_line_; }

 private:
  // The next byte, or -1 at the end of the data.
  int get();
  int peek();
  int skip_blanks();
  [[noreturn]] void fail(const std::string& problem) const;

  std::string path_;
  std::unique_ptr<ByteSource> source_;
  std::vector<char> buffer_;
  std::size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  std::int64_t line_ = 1;
  std::int64_t element_line_ = 0;
  bool started_ = false;
  bool in_array_ = false;
  bool finished_ = false;
  std::string element_;
};

}  // namespace twin
