// CUDA backend: device detection, memory, the staging area, and the
// element-wise ops (thin wrappers over cuda_kernels.cu).
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "base/error.hpp"
#include "engine/backend/cuda/cuda_backend.hpp"
#include "engine/backend/cuda/cuda_backend_impl.hpp"
#include "engine/backend/cuda/cuda_kernels.hpp"
#include "engine/backend/op_checks.hpp"
#include "engine/backend/rope.hpp"

namespace twin {

namespace {

constexpr std::size_t kInitialStaging = std::size_t{4} << 20;
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;

int code(ElemType t) { return static_cast<int>(t); }

}  // namespace

void cuda_check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw Error(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(err));
}

void cublas_check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string("cuda backend: ") + what + ": cuBLAS status " + std::to_string(static_cast<int>(status)) +
              " (" + cublasGetStatusString(status) + ")");
}

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) *why = cudaGetErrorString(err);
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "the driver reports no CUDA device";
  return count;
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  std::string why;
  const int count = cuda_device_count(&why);
  if (count == 0) throw Error("backend 'cuda': no usable CUDA device here (" + why + ")");
  if (device < 0 || device >= count) {
    throw Error("backend 'cuda': device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                " devices)");
  }
  return std::make_unique<CudaBackend>(device);
}

DeviceScratch::~DeviceScratch() {
  if (data_ != nullptr) cudaFree(data_);
}

void* DeviceScratch::ensure(std::size_t bytes, cudaStream_t stream, const char* what) {
  if (bytes <= bytes_) return data_;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &capture), what);
  if (capture != cudaStreamCaptureStatusNone) {
    throw Error(std::string("cuda backend: ") + what + ": a workspace of " + std::to_string(bytes) +
                " bytes would grow while a step graph is recorded (the warm pass grew it to " +
                std::to_string(bytes_) + ")");
  }
  const std::size_t want = std::max(bytes, bytes_ * 2);
  cuda_check(cudaStreamSynchronize(stream), what);
  ++*generation_;
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
  const cudaError_t err = cudaMalloc(&data_, want);
  if (err != cudaSuccess) {
    data_ = nullptr;
    cuda_check(err, (std::string(what) + ": workspace of " + std::to_string(want) + " bytes").c_str());
  }
  bytes_ = want;
  return data_;
}

CudaBackend::CudaBackend(int device) : device_(device) {
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  cuda_check(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_), "multiprocessor count");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "create stream");
  cuda_check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "create copy stream");
  cuda_check(cudaEventCreateWithFlags(&ops_done_, cudaEventDisableTiming), "create event");
  cuda_check(cudaEventCreateWithFlags(&copies_done_, cudaEventDisableTiming), "create event");
  cublas_check(cublasCreate(&cublas_), "cublasCreate");
  cublas_check(cublasSetStream(cublas_, stream_), "cublasSetStream");
  // A fixed workspace for cuBLAS (its default pool may allocate, which a
  // step graph's capture forbids); 32 MiB is what cuBLAS asks for on Hopper.
  cuda_check(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes), "cuBLAS workspace");
  cublas_check(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes), "cublasSetWorkspace");
  cuda_check(cudaEventCreateWithFlags(&graph_uploaded_, cudaEventDisableTiming), "create event");
  stage_reserve(kInitialStaging);
  attention_mma_ = !cuda::attention_mma_disabled_by_env();
}

CudaBackend::~CudaBackend() {
  abort_step_graph();
  cudaStreamSynchronize(stream_);
  cudaStreamSynchronize(copy_stream_);
  for (auto& [key, graph] : graphs_) destroy_graph(graph);
  graphs_.clear();
  if (graph_uploaded_ != nullptr) cudaEventDestroy(graph_uploaded_);
  if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);
  if (staging_host_ != nullptr) cudaFreeHost(staging_host_);
  if (staging_device_ != nullptr) cudaFree(staging_device_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (cublas_lt_ != nullptr) cublasLtDestroy(cublas_lt_);
  for (cudaEvent_t e : timing_events_) cudaEventDestroy(e);
  cudaEventDestroy(ops_done_);
  cudaEventDestroy(copies_done_);
  cudaStreamDestroy(copy_stream_);
  cudaStreamDestroy(stream_);
}

DeviceInfo CudaBackend::device_info() const {
  DeviceInfo info;
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
  info.name = prop.name;
  std::size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  info.total_bytes = static_cast<std::int64_t>(total_b);
  info.free_bytes = static_cast<std::int64_t>(free_b);
  info.threads = 0;
  return info;
}

Buffer CudaBackend::allocate(std::size_t bytes, MemoryKind kind) {
  if (bytes == 0) return Buffer(this, nullptr, 0, kind);
  void* p = nullptr;
  const cudaError_t err = kind == MemoryKind::host ? cudaMallocHost(&p, bytes) : cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("cuda backend: cannot allocate ") + std::to_string(bytes) + " bytes of " +
                (kind == MemoryKind::host ? "pinned host" : "device") + " memory: " + cudaGetErrorString(err));
  }
  return Buffer(this, p, bytes, kind);
}

void CudaBackend::release(void* data, std::size_t, MemoryKind kind) noexcept {
  // cudaFree / cudaFreeHost wait for the device, so no op still reads it.
  if (kind == MemoryKind::host) {
    cudaFreeHost(data);
  } else {
    cudaFree(data);
  }
}

void CudaBackend::upload(void* dst, const void* host_src, std::size_t bytes) {
  refuse_in_graph("upload");
  if (bytes == 0) return;
  cuda_check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyDefault, stream_), "upload");
  cuda_check(cudaStreamSynchronize(stream_), "upload");  // the caller may reuse host_src at once
}

void CudaBackend::download(void* host_dst, const void* src, std::size_t bytes) {
  refuse_in_graph("download");
  if (bytes == 0) return;
  cuda_check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDefault, stream_), "download");
  synchronize();
}

void CudaBackend::synchronize() {
  refuse_in_graph("synchronize");
  cuda_check(cudaStreamSynchronize(stream_), "synchronize");
  staging_offset_ = 0;  // nothing staged is in flight any more
}

void CudaBackend::begin_op_timing(std::size_t marks) {
  refuse_in_graph("op timing");
  // Default flags: timing enabled (ops_done_ disables it; these must not).
  while (timing_events_.size() < marks) {
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreate(&e), "op timing: create event");
    timing_events_.push_back(e);
  }
  timing_marked_.assign(marks, false);
}

void CudaBackend::mark_op(std::size_t index) {
  refuse_in_graph("op timing");
  if (index >= timing_marked_.size()) {
    throw Error("cuda backend: op timing mark " + std::to_string(index) + " beyond the " +
                std::to_string(timing_marked_.size()) + " begun");
  }
  // Enqueued behind every op so far; the host goes on launching.
  cuda_check(cudaEventRecord(timing_events_[index], stream_), "op timing: record event");
  timing_marked_[index] = true;
}

void CudaBackend::read_op_marks(std::span<double> ns) {
  if (ns.empty()) return;
  for (std::size_t i = 0; i < ns.size(); ++i) {
    if (i >= timing_marked_.size() || !timing_marked_[i]) {
      throw Error("cuda backend: op timing mark " + std::to_string(i) + " was not recorded");
    }
  }
  synchronize();  // every mark recorded so far has completed
  for (std::size_t i = 0; i < ns.size(); ++i) {
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, timing_events_[0], timing_events_[i]), "op timing: elapsed time");
    ns[i] = static_cast<double>(ms) * 1e6;
  }
}

void CudaBackend::after_launch(const char* op) { cuda_check(cudaGetLastError(), op); }

void CudaBackend::stage_reserve(std::size_t bytes) {
  if (graph_staging()) {
    // The graph's own area, sized by the warm pass (record) or the record
    // pass (replay): the same op sequence stages the same bytes.
    if (graph_staged_ + bytes > graph_->bytes) {
      throw Error("cuda backend: step graph: the ops staged more host data (" + std::to_string(graph_staged_ + bytes) +
                  " bytes) than the pass it was sized by (" + std::to_string(graph_->bytes) + ")");
    }
    return;
  }
  if (staging_offset_ + bytes <= staging_capacity_) return;
  synchronize();  // every staged copy and the kernels reading them are done
  if (bytes <= staging_capacity_) return;
  const std::size_t want = std::max(bytes, staging_capacity_ * 2);
  if (staging_host_ != nullptr) cudaFreeHost(staging_host_);
  if (staging_device_ != nullptr) cudaFree(staging_device_);
  staging_host_ = nullptr;
  staging_device_ = nullptr;
  staging_capacity_ = 0;
  void* h = nullptr;
  void* d = nullptr;
  cuda_check(cudaMallocHost(&h, want), "staging area (pinned host)");
  staging_host_ = static_cast<char*>(h);
  cuda_check(cudaMalloc(&d, want), "staging area (device)");
  staging_device_ = static_cast<char*>(d);
  staging_capacity_ = want;
}

const void* CudaBackend::stage_bytes(const void* host, std::size_t bytes) {
  const std::size_t size = staged_size(bytes);
  if (graph_staging()) {
    // Written to the graph's pinned area only: end_step_graph uploads the
    // pass's bytes at once, before the graph's kernels read them.
    if (graph_staged_ + size > graph_->bytes) {
      throw Error("cuda backend: internal error: step graph staging beyond its area");
    }
    char* h = graph_->host + graph_staged_;
    char* d = graph_->device + graph_staged_;
    graph_staged_ += size;
    if (bytes > 0) std::memcpy(h, host, bytes);
    return d;
  }
  if (in_graph_pass_) graph_staged_ += size;  // the warm pass counts what a graph of its key stages
  if (staging_offset_ + size > staging_capacity_) {
    throw Error("cuda backend: internal error: staging " + std::to_string(bytes) + " bytes beyond the reservation");
  }
  char* h = staging_host_ + staging_offset_;
  char* d = staging_device_ + staging_offset_;
  staging_offset_ += size;
  if (bytes > 0) {
    std::memcpy(h, host, bytes);
    cuda_check(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream_), "staging copy");
  }
  return d;
}

void CudaBackend::copy(const TensorView& src, const TensorView& dst) {
  check_copy(src, dst);
  if (src.rows * src.cols == 0 || replaying()) return;
  if (src.dtype == dst.dtype) {
    const std::size_t eb = elem_bytes(src.dtype);
    cuda_check(cudaMemcpy2DAsync(dst.data, static_cast<std::size_t>(dst.row_stride) * eb, src.data,
                                 static_cast<std::size_t>(src.row_stride) * eb, static_cast<std::size_t>(src.cols) * eb,
                                 static_cast<std::size_t>(src.rows), cudaMemcpyDefault, stream_),
               "copy");
    return;
  }
  cuda::launch_convert_2d(src.data, code(src.dtype), src.row_stride, dst.data, code(dst.dtype), dst.row_stride,
                          src.rows, src.cols, stream_);
  after_launch("copy");
}

void CudaBackend::fill(const TensorView& dst, float value) {
  check_fill(dst);
  if (replaying()) return;
  cuda::launch_fill_2d(static_cast<float*>(dst.data), dst.row_stride, dst.rows, dst.cols, value, stream_);
  after_launch("fill");
}

void CudaBackend::embedding(std::span<const TokenId> ids, const TensorView& table, const TensorView& out) {
  check_embedding(ids, table, out);
  if (ids.empty()) return;
  stage_reserve(staged_size(ids.size_bytes()));
  const std::int32_t* d_ids = stage(ids);
  if (replaying()) return;
  cuda::launch_embedding(d_ids, static_cast<std::int64_t>(ids.size()), table.data, code(table.dtype),
                         table.row_stride, static_cast<float*>(out.data), out.row_stride, table.cols, stream_);
  after_launch("embedding");
}

void CudaBackend::gather_rows(const TensorView& src, std::span<const std::int32_t> rows, const TensorView& dst) {
  check_gather_rows(src, rows, dst);
  if (rows.empty()) return;
  stage_reserve(staged_size(rows.size_bytes()));
  const std::int32_t* d_rows = stage(rows);
  if (replaying()) return;
  cuda::launch_gather_rows(static_cast<const float*>(src.data), src.row_stride, d_rows,
                           static_cast<std::int64_t>(rows.size()), static_cast<float*>(dst.data), dst.row_stride,
                           src.cols, stream_);
  after_launch("gather_rows");
}

void CudaBackend::add(const TensorView& x, const TensorView& y) {
  check_add(x, y);
  if (replaying()) return;
  cuda::launch_add(static_cast<float*>(x.data), x.row_stride, static_cast<const float*>(y.data), y.row_stride, x.rows,
                   x.cols, stream_);
  after_launch("add");
}

void CudaBackend::rmsnorm(const TensorView& x, const TensorView& weight, float eps, const TensorView& out) {
  check_rmsnorm(x, weight, out);
  if (replaying()) return;
  cuda::launch_add_rmsnorm(static_cast<float*>(x.data), x.row_stride, nullptr, 0, weight.data, code(weight.dtype), eps,
                           static_cast<float*>(out.data), out.row_stride, x.rows, x.cols, stream_);
  after_launch("rmsnorm");
}

void CudaBackend::add_rmsnorm(const TensorView& residual, const TensorView& delta, const TensorView& weight,
                              float eps, const TensorView& out) {
  check_add_rmsnorm(residual, delta, weight, out);
  if (replaying()) return;
  cuda::launch_add_rmsnorm(static_cast<float*>(residual.data), residual.row_stride,
                           static_cast<const float*>(delta.data), delta.row_stride, weight.data, code(weight.dtype), eps,
                           static_cast<float*>(out.data), out.row_stride, residual.rows, residual.cols, stream_);
  after_launch("add_rmsnorm");
}

void CudaBackend::rotary(const TensorView& q, const TensorView& k, std::span<const std::int32_t> positions,
                         const RopeConfig& rope) {
  check_rotary(q, k, positions, rope);
  const std::int32_t hd = rope.head_dim;
  const std::int32_t rot = rope.rotary_dim > 0 ? rope.rotary_dim : hd;
  const auto tokens = static_cast<std::int64_t>(positions.size());
  if (tokens == 0) return;
  const std::vector<double> inv_freq = rope_inv_freq(rope);  // the CPU's frequencies, bit for bit
  stage_reserve(staged_size(positions.size_bytes()) + staged_size(inv_freq.size() * sizeof(double)));
  const std::int32_t* d_pos = stage(positions);
  const double* d_freq = stage(std::span<const double>(inv_freq));
  if (replaying()) return;
  cuda::launch_rotary(static_cast<float*>(q.data), q.row_stride, q.cols / hd, static_cast<float*>(k.data), k.row_stride,
                      k.cols / hd, d_pos, tokens, hd, rot, d_freq, stream_);
  after_launch("rotary");
}

void CudaBackend::silu_and_mul(const TensorView& gate_up, const TensorView& out) {
  check_silu_and_mul(gate_up, out);
  if (replaying()) return;
  cuda::launch_silu_and_mul(static_cast<const float*>(gate_up.data), gate_up.row_stride, static_cast<float*>(out.data),
                            out.row_stride, out.rows, out.cols, stream_);
  after_launch("silu_and_mul");
}

}  // namespace twin
