#include "metrics/csv_output_file.hpp"

#include <zlib.h>
#include <zstd.h>

#include <climits>
#include <cstdio>
#include <vector>

#include "base/error.hpp"

namespace twin {

// Turns the rows' bytes into the file's bytes and writes them.
class CsvOutputFile::Encoder {
 public:
  explicit Encoder(const std::filesystem::path& path) : path_(path.string()) {
    file_ = std::fopen(path_.c_str(), "wb");
    if (!file_) throw Error(path_ + ": cannot open for writing");
  }
  virtual ~Encoder() {
    if (file_) std::fclose(file_);
  }
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  virtual void put(const char* data, std::size_t size) = 0;
  // Ends the stream (the compressed frame's trailer) and closes the file.
  void finish() {
    end_stream();
    const bool ok = std::fflush(file_) == 0 && !std::ferror(file_);
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!ok || !closed || failed_) throw Error(path_ + ": write failed");
  }
  std::uint64_t bytes_written() const { return written_; }
  // Hands what was put so far to the file (a compressor keeps what it has
  // not yet encoded).
  void flush() {
    if (file_ && std::fflush(file_) != 0) failed_ = true;
  }

 protected:
  virtual void end_stream() {}
  void write_raw(const void* data, std::size_t size) {
    if (size == 0 || failed_) return;
    if (std::fwrite(data, 1, size, file_) != size) failed_ = true;
    written_ += size;
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(path_ + ": " + what); }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::uint64_t written_ = 0;
  bool failed_ = false;
};

namespace {

constexpr std::size_t kChunk = 1 << 18;

class PlainEncoder final : public CsvOutputFile::Encoder {
 public:
  using Encoder::Encoder;
  void put(const char* data, std::size_t size) override { write_raw(data, size); }
};

// gzip at level 1: CSV rows are repetitive enough that the fastest level
// keeps most of the gain (docs/outputs.md has the figures), and level 6
// would cost more CPU than the simulation writing them.
class GzipEncoder final : public CsvOutputFile::Encoder {
 public:
  explicit GzipEncoder(const std::filesystem::path& path) : Encoder(path), out_(kChunk) {
    // 15 + 16: a gzip header and trailer rather than zlib's.
    if (deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) fail("cannot start the gzip encoder");
  }
  ~GzipEncoder() override { deflateEnd(&z_); }
  void put(const char* data, std::size_t size) override { run(data, size, Z_NO_FLUSH); }

 private:
  void end_stream() override { run(nullptr, 0, Z_FINISH); }
  void run(const char* data, std::size_t size, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    z_.avail_in = static_cast<uInt>(size);  // size <= kChunk
    while (true) {
      z_.next_out = out_.data();
      z_.avail_out = static_cast<uInt>(out_.size());
      const int rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) fail("gzip encoder error");
      write_raw(out_.data(), out_.size() - z_.avail_out);
      if (flush == Z_FINISH ? rc == Z_STREAM_END : z_.avail_in == 0 && z_.avail_out != 0) break;
    }
  }
  std::vector<Bytef> out_;
  z_stream z_{};
};

class ZstdEncoder final : public CsvOutputFile::Encoder {
 public:
  explicit ZstdEncoder(const std::filesystem::path& path)
      : Encoder(path), out_(ZSTD_CStreamOutSize()), stream_(ZSTD_createCCtx()) {
    if (!stream_ || ZSTD_isError(ZSTD_CCtx_setParameter(stream_, ZSTD_c_compressionLevel, ZSTD_CLEVEL_DEFAULT))) {
      fail("cannot start the zstd encoder");
    }
  }
  ~ZstdEncoder() override { ZSTD_freeCCtx(stream_); }
  void put(const char* data, std::size_t size) override { run(data, size, ZSTD_e_continue); }

 private:
  void end_stream() override { run(nullptr, 0, ZSTD_e_end); }
  void run(const char* data, std::size_t size, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{data, size, 0};
    while (true) {
      ZSTD_outBuffer out{out_.data(), out_.size(), 0};
      const std::size_t left = ZSTD_compressStream2(stream_, &out, &in, mode);
      if (ZSTD_isError(left)) fail(std::string("zstd encoder error (") + ZSTD_getErrorName(left) + ")");
      write_raw(out_.data(), out.pos);
      if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) break;
    }
  }
  std::vector<char> out_;
  ZSTD_CCtx* stream_;
};

// The stream's buffer: rows collect in kChunk bytes, then go to the encoder.
class EncodingBuffer final : public std::streambuf {
 public:
  explicit EncodingBuffer(std::unique_ptr<CsvOutputFile::Encoder> encoder)
      : encoder_(std::move(encoder)), buffer_(kChunk) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  CsvOutputFile::Encoder& encoder() { return *encoder_; }
  void drain() {
    const auto size = static_cast<std::size_t>(pptr() - pbase());
    if (size > 0) encoder_->put(pbase(), size);
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }

 protected:
  int_type overflow(int_type c) override {
    drain();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* data, std::streamsize n) override {
    std::streamsize done = 0;
    while (done < n) {
      if (pptr() == epptr()) drain();
      const std::streamsize room = epptr() - pptr();
      const std::streamsize take = std::min(room, n - done);
      std::copy(data + done, data + done + take, pptr());
      pbump(static_cast<int>(take));
      done += take;
    }
    return n;
  }
  int sync() override {  // a flush of the stream: its rows reach the file
    drain();
    encoder_->flush();
    return 0;
  }

 private:
  std::unique_ptr<CsvOutputFile::Encoder> encoder_;
  std::vector<char> buffer_;
};

std::unique_ptr<CsvOutputFile::Encoder> make_encoder(const std::filesystem::path& path, CsvCompression c) {
  switch (c) {
    case CsvCompression::gzip: return std::make_unique<GzipEncoder>(path);
    case CsvCompression::zstd: return std::make_unique<ZstdEncoder>(path);
    case CsvCompression::none: break;
  }
  return std::make_unique<PlainEncoder>(path);
}

}  // namespace

CsvCompression parse_csv_compression(std::string_view text, std::string_view flag) {
  if (text == "none") return CsvCompression::none;
  if (text == "gz" || text == "gzip") return CsvCompression::gzip;
  if (text == "zst" || text == "zstd") return CsvCompression::zstd;
  throw UsageError(std::string(flag) + ": '" + std::string(text.substr(0, 40)) + "' is not a compression; expected none, gz or zst");
}

std::string csv_file_name(std::string_view base, CsvCompression compression) {
  switch (compression) {
    case CsvCompression::gzip: return std::string(base) + ".gz";
    case CsvCompression::zstd: return std::string(base) + ".zst";
    case CsvCompression::none: break;
  }
  return std::string(base);
}

CsvOutputFile::CsvOutputFile(std::filesystem::path path, CsvCompression compression)
    : path_(std::move(path)),
      buffer_(std::make_unique<EncodingBuffer>(make_encoder(path_, compression))),
      stream_(buffer_.get()) {}

CsvOutputFile::~CsvOutputFile() = default;

void CsvOutputFile::close() {
  if (closed_) return;
  closed_ = true;
  auto& buffer = static_cast<EncodingBuffer&>(*buffer_);
  if (!stream_) throw Error(path_.string() + ": write failed");
  buffer.drain();
  buffer.encoder().finish();
}

std::uint64_t CsvOutputFile::bytes_written() const {
  return static_cast<EncodingBuffer&>(*buffer_).encoder().bytes_written();
}

}  // namespace twin
