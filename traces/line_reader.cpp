#include "traces/line_reader.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.hpp"

namespace twin {

// The buffer starts at 64 KiB and doubles, up to buffer_bytes, while reads
// keep filling it: a short file touches 64 KiB, not 4 MiB (a fuzzer opens
// millions of them, and zeroing 4 MiB each cost it 10x under ASan), and a
// long one reaches full-size reads within a few refills.
LineReader::LineReader(const std::string& path, std::size_t buffer_bytes)
    : path_(path),
      source_(open_byte_source(path)),
      buffer_(std::min<std::size_t>(std::max<std::size_t>(buffer_bytes, 64), std::size_t{1} << 16)),
      full_bytes_(std::max<std::size_t>(buffer_bytes, 64)) {}

LineReader::~LineReader() = default;

bool LineReader::refill() {
  if (eof_) return false;
  // Keep the partial line at the front; grow only for a line longer than
  // the whole buffer.
  const std::size_t pending = end_ - begin_;
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, pending);
    begin_ = 0;
    end_ = pending;
  }
  if (end_ == buffer_.size()) {
    if (buffer_.size() >= kMaxLineBytes)
      throw Error(path_ + ":" + std::to_string(line_number_ + 1) + ": line longer than " +
                  std::to_string(kMaxLineBytes >> 20) + " MiB (not a line-oriented trace?)");
    buffer_.resize(std::min(buffer_.size() * 2, kMaxLineBytes));
  } else if (filled_ && buffer_.size() < full_bytes_) {
    buffer_.resize(std::min(buffer_.size() * 2, full_bytes_));
  }
  const std::size_t want = buffer_.size() - end_;
  const std::size_t got = source_->read(buffer_.data() + end_, want);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  filled_ = got == want;
  end_ += got;
  return true;
}

int LineReader::peek_first_nonblank() {
  std::size_t i = begin_;
  for (;;) {
    for (; i < end_; ++i) {
      const auto c = static_cast<unsigned char>(buffer_[i]);
      const bool bom_byte = i - begin_ < 3 && (c == 0xEF || c == 0xBB || c == 0xBF);
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && !bom_byte) return c;
    }
    if (end_ - begin_ >= kMaxLineBytes) return -1;
    const std::size_t scanned = i - begin_;
    if (!refill()) return -1;
    i = begin_ + scanned;
  }
}

bool LineReader::next(std::string_view& line) {
  for (;;) {
    const char* start = buffer_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    if (nl) {
      std::size_t len = static_cast<const char*>(nl) - start;
      begin_ += len + 1;
      if (len > 0 && start[len - 1] == '\r') --len;
      line = std::string_view(start, len);
      ++line_number_;
      return true;
    }
    if (!refill()) {
      if (begin_ == end_) return false;
      // Last line without a trailing newline.
      start = buffer_.data() + begin_;
      std::size_t len = end_ - begin_;
      begin_ = end_;
      if (len > 0 && start[len - 1] == '\r') --len;
      line = std::string_view(start, len);
      ++line_number_;
      return true;
    }
  }
}

}  // namespace twin
