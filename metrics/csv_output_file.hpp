#pragma once
// A result CSV on disk, plain or compressed as it is written: gzip (zlib,
// level 1) or zstd (level 3, libzstd's default), one stream per file, so a
// 27-million-request run's rows never sit in memory and `zcat` / `zstdcat`
// give back the plain file byte for byte. Which one a user gets is
// --compress (docs/outputs.md, "Compressed outputs").
#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace twin {

enum class CsvCompression { none, gzip, zstd };

// "none", "gz" or "zst" (and "gzip", "zstd"); anything else is a
// twin::UsageError naming `flag` and the choices.
CsvCompression parse_csv_compression(std::string_view text, std::string_view flag);
// The file name with its compression's extension: requests.csv.gz.
std::string csv_file_name(std::string_view base, CsvCompression compression);

class CsvOutputFile {
 public:
  // Creates or truncates `path`; twin::Error naming it when that fails.
  CsvOutputFile(std::filesystem::path path, CsvCompression compression);
  ~CsvOutputFile();
  CsvOutputFile(const CsvOutputFile&) = delete;
  CsvOutputFile& operator=(const CsvOutputFile&) = delete;

  std::ostream& stream() { return stream_; }
  // Ends the compressed stream and closes the file; twin::Error naming the
  // file if any write failed. Without it the destructor closes quietly.
  void close();
  // Bytes on disk so far (all of them after close()).
  std::uint64_t bytes_written() const;
  const std::filesystem::path& path() const { return path_; }

  class Encoder;  // one per compression (csv_output_file.cpp)

 private:
  std::filesystem::path path_;
  std::unique_ptr<std::streambuf> buffer_;
  std::ostream stream_;
  bool closed_ = false;
};

}  // namespace twin
