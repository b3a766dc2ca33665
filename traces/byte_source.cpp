#include "traces/byte_source.hpp"

#include "base/error.hpp"
#include "traces/decoders.hpp"

namespace twin {

namespace {

class PlainSource final : public ByteSource {
 public:
  explicit PlainSource(std::unique_ptr<RawFile> file) : file_(std::move(file)) {}
  std::size_t read(char* data, std::size_t size) override { return file_->read(data, size); }
  Compression compression() const override { return Compression::none; }

 private:
  std::unique_ptr<RawFile> file_;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string_view compression_name(Compression c) {
  switch (c) {
    case Compression::gzip:
      return "gzip";
    case Compression::zstd:
      return "zstd";
    case Compression::none:
      break;
  }
  return "plain";
}

std::unique_ptr<ByteSource> open_byte_source(const std::string& path) {
  auto file = std::make_unique<RawFile>(path);
  const std::string_view magic = file->peek(4);
  // gzip: 1f 8b (RFC 1952); zstd frame: 28 b5 2f fd (RFC 8878).
  Compression c = Compression::none;
  if (magic.size() >= 2 && magic[0] == '\x1f' && magic[1] == '\x8b') c = Compression::gzip;
  if (magic.size() >= 4 && magic == std::string_view("\x28\xb5\x2f\xfd", 4)) c = Compression::zstd;
  // A name that promises compression the bytes lack is a mix-up worth
  // naming, rather than "unrecognised trace format" on binary text.
  if (c != Compression::gzip && ends_with(path, ".gz"))
    throw Error(path + ": the name ends in .gz but the file is not gzip data");
  if (c != Compression::zstd && ends_with(path, ".zst"))
    throw Error(path + ": the name ends in .zst but the file is not zstd data");
  switch (c) {
    case Compression::gzip:
      return make_gzip_source(std::move(file));
    case Compression::zstd:
      return make_zstd_source(std::move(file));
    case Compression::none:
      break;
  }
  return std::make_unique<PlainSource>(std::move(file));
}

}  // namespace twin
