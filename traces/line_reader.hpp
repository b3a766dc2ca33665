#pragma once
// Reads a text file line by line through one large buffer: lines are views
// into the buffer, valid until the next call, so a multi-gigabyte trace is read
// with flat memory and no per-line allocation.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace twin {

class LineReader {
 public:
  // Throws twin::Error naming the path if the file cannot be opened.
  explicit LineReader(const std::string& path, std::size_t buffer_bytes = 1 << 22);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its "\n" / "\r\n"; false at end of file.
  bool next(std::string_view& line);
  // 1-based number of the line last returned.
  std::int64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }

 private:
  bool refill();

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;  // start of unread data in buffer_
  std::size_t end_ = 0;    // end of valid data in buffer_
  bool eof_ = false;
  std::int64_t line_number_ = 0;
};

}  // namespace twin
