#pragma once
// Views the ops read and write. A view does not own memory: it points into a
// Buffer allocated by the same backend (device memory on a GPU). Everything
// the engine touches is 2-D row-major: [rows, cols] with a row stride in
// elements, so a column slice (q, k or v out of a fused qkv projection) is a
// view with row_stride > cols and no copy.
#include <cstdint>

#include "engine/backend/dtype.hpp"

namespace twin {

struct TensorView {
  void* data = nullptr;
  ElemType dtype = ElemType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;  // elements between row starts; >= cols

  std::int64_t numel() const { return rows * cols; }
  bool contiguous() const { return row_stride == cols; }
  // Byte address of element (r, c). Host arithmetic only: never dereference
  // on the host for a device backend.
  void* at(std::int64_t r, std::int64_t c = 0) const {
    return static_cast<char*>(data) + (r * row_stride + c) * static_cast<std::int64_t>(elem_bytes(dtype));
  }
  TensorView slice_rows(std::int64_t first, std::int64_t count) const {
    return {at(first), dtype, count, cols, row_stride};
  }
  TensorView slice_cols(std::int64_t first, std::int64_t count) const {
    return {at(0, first), dtype, rows, count, row_stride};
  }
};

inline TensorView make_view(void* data, ElemType dtype, std::int64_t rows, std::int64_t cols) {
  return {data, dtype, rows, cols, cols};
}

// One layer's paged KV cache. K and V each have layout
// [num_blocks, block_size, kv_heads, head_dim], contiguous. Token slot
// s = block_id * block_size + offset lives at K + s * kv_heads * head_dim.
// The block ids are the core's BlockPool ids, so the engine maps them 1:1.
struct KvCacheView {
  void* k = nullptr;
  void* v = nullptr;
  ElemType dtype = ElemType::f32;
  std::int64_t num_blocks = 0;
  std::int32_t block_size = 0;
  std::int32_t kv_heads = 0;
  std::int32_t head_dim = 0;
  // Per-tensor scales of an fp8 cache: a K element is stored as k / k_scale
  // and read back as stored x k_scale (V likewise). Wider dtypes store values
  // as they are and keep 1.
  float k_scale = 1.0f;
  float v_scale = 1.0f;

  std::int64_t slot_elems() const { return static_cast<std::int64_t>(kv_heads) * head_dim; }
  std::int64_t block_elems() const { return slot_elems() * block_size; }
  std::int64_t bytes_per_tensor() const {
    return num_blocks * block_elems() * static_cast<std::int64_t>(elem_bytes(dtype));
  }
};

}  // namespace twin
