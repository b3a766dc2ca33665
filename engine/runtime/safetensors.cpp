#include "engine/runtime/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "models/json_fields.hpp"

namespace twin {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Bytes of a tensor of `shape` with `elem`-byte elements; false when the
// product overflows 64 bits (a shape of [2^62, 4] must not wrap to 0 bytes
// and match an empty data range).
bool tensor_bytes(const std::vector<std::int64_t>& shape, std::size_t elem, std::uint64_t& out) {
  std::uint64_t n = elem;
  for (std::int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) return false;
  }
  out = n;
  return true;
}

}  // namespace

std::size_t safetensors_dtype_bytes(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer forever; it is refused below as any file that is not regular.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error(path + ": cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file (a FIFO, device or directory): a safetensors file is mapped whole");
  }
  map_bytes_ = static_cast<std::size_t>(st.st_size);
  if (map_bytes_ < 8) {
    ::close(fd);
    throw Error(path + ": not a safetensors file (" + std::to_string(map_bytes_) + " bytes, expected at least 8)");
  }
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error(path + ": mmap failed");
  }
  // A constructor that throws runs no destructor: a bad header must unmap
  // here, or every refused file keeps its mapping (the fuzzer's run slowed
  // to a crawl as they piled up).
  try {
    read_header();
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
}

void SafetensorsFile::read_header() {
  const std::string& path = path_;
  const auto* base = static_cast<const std::byte*>(map_);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | std::to_integer<std::uint64_t>(base[i]);
  if (header_len > map_bytes_ - 8) {
    throw Error(path + ": header length " + std::to_string(header_len) + " exceeds the file size " +
                std::to_string(map_bytes_));
  }
  const std::byte* data_start = base + 8 + header_len;
  const std::uint64_t data_bytes = map_bytes_ - 8 - header_len;
  // The format caps headers at 100 MB; the guarded parser also caps nesting.
  JsonLimits limits;
  limits.max_bytes = std::size_t{100} << 20;
  const nlohmann::json header = parse_json_guarded(
      std::string_view(reinterpret_cast<const char*>(base + 8), static_cast<std::size_t>(header_len)),
      path + ": header", limits);
  if (!header.is_object()) throw Error(path + ": header is not a JSON object");
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path + ": tensor '" + excerpt(name) + "'";
    try {
      SafetensorsTensor t;
      t.dtype = entry.at("dtype").get<std::string>();
      t.shape = entry.at("shape").get<std::vector<std::int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_bytes) {
        throw Error(where + ": data_offsets outside the data section (" + std::to_string(data_bytes) + " bytes)");
      }
      for (std::int64_t d : t.shape) {
        if (d < 0) throw Error(where + ": negative dimension in shape " + shape_text(t.shape));
      }
      const std::size_t elem = safetensors_dtype_bytes(t.dtype);
      if (elem == 0) throw Error(where + ": unknown dtype '" + excerpt(t.dtype) + "'");
      t.bytes = offsets[1] - offsets[0];
      std::uint64_t expected = 0;
      if (!tensor_bytes(t.shape, elem, expected) || expected != t.bytes) {
        throw Error(where + ": " + std::to_string(t.bytes) + " bytes do not hold shape " + shape_text(t.shape) +
                    " of " + t.dtype);
      }
      t.data = data_start + offsets[0];
      tensors_.emplace(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + ": bad header entry: " + e.what());
    }
  }
  check_no_overlap();
}

// Two tensors sharing bytes would each read the other's data (the format
// forbids it; its reference reader refuses it too).
void SafetensorsFile::check_no_overlap() const {
  std::vector<std::pair<const std::byte*, const std::string*>> starts;
  starts.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) {
    if (t.bytes > 0) starts.emplace_back(t.data, &name);
  }
  std::sort(starts.begin(), starts.end());
  for (std::size_t i = 1; i < starts.size(); ++i) {
    const SafetensorsTensor& before = tensors_.at(*starts[i - 1].second);
    if (before.data + before.bytes > starts[i].first) {
      throw Error(path_ + ": tensors '" + excerpt(*starts[i - 1].second) + "' and '" + excerpt(*starts[i].second) +
                  "' overlap in the data section");
    }
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      tensors_(std::move(o.tensors_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, map_bytes_);
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    tensors_ = std::move(o.tensors_);
  }
  return *this;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void write_safetensors(const std::string& path, std::span<const SafetensorsWriteTensor> tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    const std::size_t elem = safetensors_dtype_bytes(t.dtype);
    if (elem == 0) throw Error(path + ": tensor '" + t.name + "': unknown dtype '" + t.dtype + "'");
    std::uint64_t expected = 0;
    if (!tensor_bytes(t.shape, elem, expected) || expected != t.data.size()) {
      throw Error(path + ": tensor '" + t.name + "': " + std::to_string(t.data.size()) +
                  " bytes do not hold shape " + shape_text(t.shape) + " of " + t.dtype);
    }
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // the format pads the header with spaces
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot open for writing");
  unsigned char len[8];
  std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors) out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  out.flush();
  if (!out) throw Error(path + ": write failed");
}

}  // namespace twin
