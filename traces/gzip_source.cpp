// gzip (and zlib) streams through zlib's inflate, one fixed input buffer and
// the caller's output buffer: a 32 KiB window whatever the file size.
#include <zlib.h>

#include <climits>
#include <vector>

#include "base/error.hpp"
#include "traces/decoders.hpp"

namespace twin {

namespace {

class GzipSource final : public ByteSource {
 public:
  explicit GzipSource(std::unique_ptr<RawFile> file) : file_(std::move(file)), in_(1 << 16) {
    // 15 + 32: any window size, gzip or zlib header recognised.
    if (inflateInit2(&z_, 15 + 32) != Z_OK) throw Error(file_->path() + ": cannot start the gzip decoder");
  }
  ~GzipSource() override { inflateEnd(&z_); }

  Compression compression() const override { return Compression::gzip; }

  std::size_t read(char* data, std::size_t size) override {
    if (size > UINT_MAX) size = UINT_MAX;
    z_.next_out = reinterpret_cast<Bytef*>(data);
    z_.avail_out = static_cast<uInt>(size);
    while (z_.avail_out == size && !done_) {
      if (z_.avail_in == 0 && !fill()) {
        // The data ended: fine between members, a truncation inside one.
        if (in_member_) throw Error(file_->path() + ": the gzip data ends early (truncated file?)");
        done_ = true;
        break;
      }
      if (!in_member_) {
        // Another member follows (concatenated .gz files are one stream).
        if (inflateReset(&z_) != Z_OK) throw Error(file_->path() + ": cannot restart the gzip decoder");
        in_member_ = true;
      }
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        in_member_ = false;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        // zlib's messages are fixed ASCII text, safe to print.
        throw Error(file_->path() + ": corrupt gzip data (" + (z_.msg ? z_.msg : "zlib error " + std::to_string(rc)) +
                    ")");
      }
    }
    return size - z_.avail_out;
  }

 private:
  bool fill() {
    const std::size_t got = file_->read(reinterpret_cast<char*>(in_.data()), in_.size());
    z_.next_in = in_.data();
    z_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }

  std::unique_ptr<RawFile> file_;
  std::vector<Bytef> in_;
  z_stream z_{};
  bool in_member_ = true;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<ByteSource> make_gzip_source(std::unique_ptr<RawFile> file) {
  return std::make_unique<GzipSource>(std::move(file));
}

}  // namespace twin
