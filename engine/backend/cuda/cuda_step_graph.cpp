// CUDA backend: step graphs (engine/backend/step_graph.hpp). A decode
// step's ops are captured once per key into a CUDA graph with its own
// staging area; a replay restages the step's host data at the recorded
// offsets (the ops launch nothing), uploads it in one copy and launches the
// graph, so the GPU runs the step's few hundred kernels back to back and the
// host pays one launch.
#include <string>

#include "base/error.hpp"
#include "engine/backend/cuda/cuda_backend_impl.hpp"

namespace twin {

namespace {
const char* pass_name(StepGraphPass pass) {
  switch (pass) {
    case StepGraphPass::warm: return "warm";
    case StepGraphPass::record: return "record";
    case StepGraphPass::replay: return "replay";
  }
  return "?";
}
}  // namespace

void CudaBackend::refuse_in_graph(const char* op) const {
  if (in_graph_pass_ && graph_pass_ != StepGraphPass::warm) {
    throw Error(std::string("cuda backend: ") + op + " inside a step graph's " + pass_name(graph_pass_) +
                " pass (sampling, MoE experts, copies and timing run outside graphs)");
  }
}

void CudaBackend::destroy_graph(StepGraph& g) noexcept {
  if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
  if (g.host != nullptr) cudaFreeHost(g.host);
  if (g.device != nullptr) cudaFree(g.device);
  g = StepGraph{};
}

bool CudaBackend::has_step_graph(const StepGraphKey& key) {
  const auto it = graphs_.find(key);
  if (it == graphs_.end()) return false;
  if (it->second.exec != nullptr && it->second.generation == workspace_generation_) return true;
  // A workspace it points into has been reallocated since: drop it (the
  // last replay that read it is done once the stream is).
  cuda_check(cudaStreamSynchronize(stream_), "step graph: drop a stale graph");
  destroy_graph(it->second);
  graphs_.erase(it);
  return false;
}

void CudaBackend::begin_step_graph(const StepGraphKey& key, StepGraphPass pass) {
  if (in_graph_pass_) throw Error("cuda backend: a step graph pass begun inside another");
  if (key.rows < 1 || key.max_context < 1) {
    throw Error("cuda backend: step graph key of " + std::to_string(key.rows) + " rows and " +
                std::to_string(key.max_context) + " keys");
  }
  graph_staged_ = 0;
  graph_ = nullptr;
  graph_key_ = key;  // before anything can fail: abort_step_graph drops what this begin made
  if (pass == StepGraphPass::replay) {
    const auto it = graphs_.find(key);
    if (it == graphs_.end() || it->second.exec == nullptr) throw Error("cuda backend: replay of a step graph never recorded");
    graph_ = &it->second;
    // The last replay's upload has read the staging area (usually long
    // since: the step's sampling waited for the device).
    cuda_check(cudaEventSynchronize(graph_uploaded_), "step graph: wait for the last upload");
  } else if (pass == StepGraphPass::record) {
    if (!(warm_key_ == key)) throw Error("cuda backend: a step graph recorded without a warm pass of its key");
    const auto old = graphs_.find(key);
    if (old != graphs_.end()) {
      cuda_check(cudaStreamSynchronize(stream_), "step graph: replace a graph");
      destroy_graph(old->second);
      graphs_.erase(old);
    }
    StepGraph& g = graphs_[key];
    g.bytes = warm_staged_;
    if (g.bytes > 0) {
      void* h = nullptr;
      void* d = nullptr;
      cuda_check(cudaMallocHost(&h, g.bytes), "step graph staging (pinned host)");
      g.host = static_cast<char*>(h);
      cuda_check(cudaMalloc(&d, g.bytes), "step graph staging (device)");
      g.device = static_cast<char*>(d);
    }
    graph_ = &g;
    // Thread-local: only this thread's calls are checked against the
    // capture; the ops enqueue on stream_ alone.
    cuda_check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "step graph: begin capture");
    capturing_ = true;
  }
  in_graph_pass_ = true;
  graph_pass_ = pass;
}

// On a failure the pass stays open, so abort_step_graph drops its graph.
void CudaBackend::end_step_graph() {
  if (!in_graph_pass_) throw Error("cuda backend: end of a step graph pass never begun");
  const StepGraphPass pass = graph_pass_;
  if (pass == StepGraphPass::warm) {
    in_graph_pass_ = false;
    warm_staged_ = graph_staged_;
    warm_key_ = graph_key_;
    return;
  }
  StepGraph& g = *graph_;
  if (pass == StepGraphPass::record) {
    cudaGraph_t graph = nullptr;
    capturing_ = false;
    cuda_check(cudaStreamEndCapture(stream_, &graph), "step graph: end capture");
    const cudaError_t made = cudaGraphInstantiate(&g.exec, graph, 0);
    cudaGraphDestroy(graph);
    cuda_check(made, "step graph: instantiate");
    if (graph_staged_ != g.bytes) {
      throw Error("cuda backend: step graph: the record pass staged " + std::to_string(graph_staged_) +
                  " bytes, the warm pass " + std::to_string(g.bytes));
    }
    g.generation = workspace_generation_;
    in_graph_pass_ = false;
    return;
  }
  // Replay: the same staged bytes as recorded, else the arguments the
  // kernels were captured with do not describe this step.
  if (graph_staged_ != g.bytes) {
    throw Error("cuda backend: step graph: a replay staged " + std::to_string(graph_staged_) + " bytes where " +
                std::to_string(g.bytes) + " were recorded");
  }
  if (g.bytes > 0) {
    cuda_check(cudaMemcpyAsync(g.device, g.host, g.bytes, cudaMemcpyHostToDevice, stream_), "step graph: upload");
  }
  cuda_check(cudaEventRecord(graph_uploaded_, stream_), "step graph: upload event");
  cuda_check(cudaGraphLaunch(g.exec, stream_), "step graph: launch");
  in_graph_pass_ = false;
}

void CudaBackend::abort_step_graph() noexcept {
  if (capturing_) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);  // fails for an invalidated capture; either way it ends
    if (graph != nullptr) cudaGraphDestroy(graph);
    capturing_ = false;
  }
  cudaGetLastError();  // the non-sticky error a failed capture leaves
  // The key's graph: one whose record or replay failed, or one a failed
  // begin left half made (no executable graph yet).
  const auto it = graphs_.find(graph_key_);
  if (it != graphs_.end() &&
      (it->second.exec == nullptr || (in_graph_pass_ && graph_pass_ != StepGraphPass::warm))) {
    cudaStreamSynchronize(stream_);
    destroy_graph(it->second);
    graphs_.erase(it);
  }
  in_graph_pass_ = false;
  graph_ = nullptr;
}

void CudaBackend::clear_step_graphs(const void* owner) noexcept {
  bool synced = false;
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (it->first.owner != owner) {
      ++it;
      continue;
    }
    if (!synced) {
      cudaStreamSynchronize(stream_);
      synced = true;
    }
    destroy_graph(it->second);
    it = graphs_.erase(it);
  }
}

}  // namespace twin
