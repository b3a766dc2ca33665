#include "traces/line_reader.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/error.hpp"

namespace twin {

LineReader::LineReader(const std::string& path, std::size_t buffer_bytes)
    : path_(path), buffer_(buffer_bytes < 64 ? 64 : buffer_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("cannot read trace file '" + path + "': it is a directory");
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw Error("cannot open trace file '" + path + "': " + std::strerror(errno));
}

LineReader::~LineReader() {
  if (file_) std::fclose(file_);
}

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
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);
  const std::size_t got = std::fread(buffer_.data() + end_, 1, buffer_.size() - end_, file_);
  if (got == 0) {
    if (std::ferror(file_)) throw Error("error reading trace file '" + path_ + "'");
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
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
