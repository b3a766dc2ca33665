// zstd streams through libzstd's streaming decoder. Its default window limit
// (128 MiB) bounds memory: a frame that asks for more is refused, not honoured.
#include <zstd.h>

#include <vector>

#include "base/error.hpp"
#include "traces/decoders.hpp"

namespace twin {

namespace {

class ZstdSource final : public ByteSource {
 public:
  explicit ZstdSource(std::unique_ptr<RawFile> file)
      : file_(std::move(file)), in_(ZSTD_DStreamInSize()), stream_(ZSTD_createDStream()) {
    if (!stream_) throw Error(file_->path() + ": cannot start the zstd decoder");
  }
  ~ZstdSource() override { ZSTD_freeDStream(stream_); }

  Compression compression() const override { return Compression::zstd; }

  std::size_t read(char* data, std::size_t size) override {
    ZSTD_outBuffer out{data, size, 0};
    while (out.pos == 0 && !done_) {
      if (input_.pos == input_.size) {
        const std::size_t got = file_->read(in_.data(), in_.size());
        if (got == 0) {
          // The data ended: fine after a whole frame, a truncation inside one.
          if (in_frame_) throw Error(file_->path() + ": the zstd data ends early (truncated file?)");
          done_ = true;
          break;
        }
        input_ = ZSTD_inBuffer{in_.data(), got, 0};
      }
      const std::size_t rc = ZSTD_decompressStream(stream_, &out, &input_);
      if (ZSTD_isError(rc))
        throw Error(file_->path() + ": corrupt zstd data (" + ZSTD_getErrorName(rc) + ")");
      in_frame_ = rc != 0;  // 0: a frame has just been completed
    }
    return out.pos;
  }

 private:
  std::unique_ptr<RawFile> file_;
  std::vector<char> in_;
  ZSTD_DStream* stream_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  bool in_frame_ = false;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<ByteSource> make_zstd_source(std::unique_ptr<RawFile> file) {
  return std::make_unique<ZstdSource>(std::move(file));
}

}  // namespace twin
