#pragma once
// Hugging Face safetensors files: an 8-byte little-endian header length, a
// JSON header mapping tensor names to {dtype, shape, data_offsets}, then the
// raw little-endian data. The reader maps the file read-only; the writer is
// for tests and tools that make small checkpoints.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace twin {

struct SafetensorsTensor {
  std::string dtype;                // as written: "F32", "F16", "BF16", ...
  std::vector<std::int64_t> shape;  // row-major
  const std::byte* data = nullptr;  // into the mapped file
  std::size_t bytes = 0;
};

class SafetensorsFile {
 public:
  // Maps the file and checks the header: offsets inside the data section,
  // byte counts matching dtype and shape, no two tensors sharing bytes, no
  // name given twice, a regular file (a FIFO is refused, never waited on).
  // Throws twin::Error naming the file and the tensor otherwise.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;

 private:
  void read_header();  // checks the header of the mapped file, fills tensors_
  void check_no_overlap() const;  // Error naming two tensors that share bytes

  std::string path_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::map<std::string, SafetensorsTensor> tensors_;
};

// Bytes per element of a safetensors dtype name, 0 if unknown.
std::size_t safetensors_dtype_bytes(const std::string& dtype);

struct SafetensorsWriteTensor {
  std::string name;
  std::string dtype;  // "F32", "F16" or "BF16"
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;
};

// Writes tensors in the order given (the header's keys are sorted, as the
// reference implementation does). Throws twin::Error when a byte count does
// not match its dtype and shape or the file cannot be written.
void write_safetensors(const std::string& path, std::span<const SafetensorsWriteTensor> tensors);

}  // namespace twin
