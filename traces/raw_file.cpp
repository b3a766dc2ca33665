#include "traces/raw_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "base/error.hpp"

namespace twin {

RawFile::RawFile(const std::string& path) : path_(path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("cannot read trace file '" + path + "': it is a directory");
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw Error("cannot open trace file '" + path + "': " + std::strerror(errno));
}

RawFile::~RawFile() {
  if (file_) std::fclose(file_);
}

std::string_view RawFile::peek(std::size_t n) {
  while (peeked_.size() < n) {
    char buf[64];
    const std::size_t want = std::min(n - peeked_.size(), sizeof buf);
    const std::size_t got = std::fread(buf, 1, want, file_);
    if (got == 0) {
      if (std::ferror(file_)) throw Error("error reading trace file '" + path_ + "'");
      break;
    }
    peeked_.insert(peeked_.end(), buf, buf + got);
  }
  return {peeked_.data(), std::min(n, peeked_.size())};
}

std::size_t RawFile::read(char* data, std::size_t size) {
  if (peeked_pos_ < peeked_.size()) {
    const std::size_t n = std::min(size, peeked_.size() - peeked_pos_);
    std::memcpy(data, peeked_.data() + peeked_pos_, n);
    peeked_pos_ += n;
    return n;
  }
  const std::size_t got = std::fread(data, 1, size, file_);
  if (got == 0 && std::ferror(file_)) throw Error("error reading trace file '" + path_ + "'");
  return got;
}

}  // namespace twin
