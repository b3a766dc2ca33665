#pragma once
// Reads a text file (plain, gzip or zstd: byte_source.hpp) line by line
// through one large buffer: lines are views into the buffer, valid until the
// next call, so a multi-gigabyte trace is read with flat memory and no
// per-line allocation.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "traces/byte_source.hpp"

namespace twin {

// A line longer than this is an error, not a reason to hold the file in
// memory (a decompressed stream can be far larger than the file).
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 28;
// A row's hash id or token list longer than this is an error: within the
// line cap, "1,1,1,..." would otherwise become 2^27 ids (1 GiB) from one
// row. 2^24 is the generator's length cap (length_dist.hpp), far beyond any
// context a model serves.
inline constexpr std::size_t kMaxRowListElements = std::size_t{1} << 24;

class LineReader {
 public:
  // Throws twin::Error naming the path if the file cannot be opened.
  explicit LineReader(const std::string& path, std::size_t buffer_bytes = 1 << 22);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its "\n" / "\r\n"; false at end of file.
  bool next(std::string_view& line);
  // The first byte that is not a blank, a line end or a UTF-8 byte order
  // mark, without consuming anything; -1 if there is none in the first
  // kMaxLineBytes. Tells a JSON array from lines before any line is read.
  int peek_first_nonblank();
  // 1-based number of the line last returned.
  std::int64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }
  Compression compression() const { return source_->compression(); }

 private:
  bool refill();

  std::string path_;
  std::unique_ptr<ByteSource> source_;
  std::vector<char> buffer_;
  std::size_t full_bytes_;  // the size reads grow the buffer to
  bool filled_ = false;     // the last read filled the buffer
  std::size_t begin_ = 0;  // start of unread data in buffer_
  std::size_t end_ = 0;    // end of valid data in buffer_
  bool eof_ = false;
  std::int64_t line_number_ = 0;
};

}  // namespace twin
