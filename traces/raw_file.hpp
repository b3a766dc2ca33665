#pragma once
// A file read in chunks, with the first bytes peeked (to recognise a
// compression format) handed back before the rest, so detection works on
// pipes as well as on regular files.
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace twin {

class RawFile {
 public:
  // Throws twin::Error naming the path if it cannot be opened.
  explicit RawFile(const std::string& path);
  ~RawFile();
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;

  // The first `n` bytes (fewer at a short file), to be read again by read().
  std::string_view peek(std::size_t n);
  // Up to `size` bytes; 0 at the end of the file. twin::Error on a read error.
  std::size_t read(char* data, std::size_t size);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<char> peeked_;
  std::size_t peeked_pos_ = 0;
};

}  // namespace twin
