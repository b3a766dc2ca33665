#pragma once
// Owned memory from a backend. Device memory on a GPU; MemoryKind::host is
// host memory the backend can copy to and from quickly (pinned on CUDA), used
// for the swap space. A Buffer must not outlive the Backend that made it.
#include <cstddef>
#include <cstdint>
#include <utility>

#include "engine/backend/tensor.hpp"

namespace twin {

class Backend;

enum class MemoryKind : std::uint8_t { device, host };

class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, void* data, std::size_t bytes, MemoryKind kind)
      : owner_(owner), data_(data), bytes_(bytes), kind_(kind) {}
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer tmp(std::move(other));
    swap(tmp);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset();  // frees now; the buffer becomes empty

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }
  explicit operator bool() const { return data_ != nullptr; }

  // A [rows, cols] contiguous view starting offset_bytes into the buffer.
  // Throws twin::Error if it does not fit.
  TensorView view(ElemType dtype, std::int64_t rows, std::int64_t cols, std::size_t offset_bytes = 0) const;

 private:
  void swap(Buffer& o) noexcept {
    std::swap(owner_, o.owner_);
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    std::swap(kind_, o.kind_);
  }
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::device;
};

}  // namespace twin
