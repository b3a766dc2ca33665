#pragma once
// The bytes of a trace file, decompressed on the fly: plain, gzip (zlib) or
// zstd, recognised by the magic bytes at the start of the file, so a renamed
// or piped file reads the same. Reads are streamed through fixed buffers:
// memory stays flat whatever the file size.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace twin {

enum class Compression { none, gzip, zstd };

// "plain", "gzip" or "zstd" (messages).
std::string_view compression_name(Compression c);

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to `size` bytes into `data`; 0 only at the end of the data. A read
  // error or corrupt compressed data throws twin::Error "FILE: problem"
  // (never quoting the bytes themselves).
  virtual std::size_t read(char* data, std::size_t size) = 0;
  virtual Compression compression() const = 0;
};

// Opens `path` (twin::Error naming it if it is missing, a directory, or named
// .gz / .zst without being that kind of data).
std::unique_ptr<ByteSource> open_byte_source(const std::string& path);

}  // namespace twin
