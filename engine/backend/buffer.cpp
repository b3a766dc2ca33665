#include "engine/backend/buffer.hpp"

#include <string>

#include "base/error.hpp"
#include "engine/backend/backend.hpp"

namespace twin {

void Buffer::reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->release(data_, bytes_, kind_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

TensorView Buffer::view(ElemType dtype, std::int64_t rows, std::int64_t cols, std::size_t offset_bytes) const {
  if (rows < 0 || cols < 0) throw Error("Buffer::view: negative shape");
  const std::size_t need = static_cast<std::size_t>(rows * cols) * elem_bytes(dtype);
  if (offset_bytes > bytes_ || need > bytes_ - offset_bytes) {
    throw Error("Buffer::view: [" + std::to_string(rows) + ", " + std::to_string(cols) + "] " +
                std::string(elem_type_name(dtype)) + " at offset " + std::to_string(offset_bytes) +
                " needs " + std::to_string(need) + " bytes; the buffer has " + std::to_string(bytes_));
  }
  return {static_cast<char*>(data_) + offset_bytes, dtype, rows, cols, cols};
}

}  // namespace twin
