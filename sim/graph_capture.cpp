#include "sim/graph_capture.hpp"

#include <algorithm>

#include "sim/engine_traits.hpp"

namespace twin {

namespace {

// SGLang's cuda_graph_max_bs default (server_args.py,
// _handle_gpu_memory_settings), by the GPU's memory in MiB.
int64_t sglang_default_max_bs(double gpu_mib, int tp) {
  if (gpu_mib < 20 * 1024) return 8;                  // T4, 4080
  if (gpu_mib < 35 * 1024) return tp < 4 ? 24 : 80;   // A10, 4090, 5090
  if (gpu_mib < 60 * 1024) return tp < 4 ? 32 : 160;  // A100 40 GB, L40
  if (gpu_mib < 160 * 1024) return tp < 4 ? 256 : 512;  // H100, A100 80 GB, H20, H200
  return 512;                                         // B200, MI300
}

}  // namespace

GraphCapture graph_capture_for(const ReplicaConfig& replica, const HardwareDesc& hw, int tp) {
  GraphCapture g;
  const EngineTraits* engine = engine_traits(replica.scheduler.preset);
  const bool sglang = engine && engine->graph_sizes == GraphSizes::sglang;
  if (sglang) g.sizes = GraphCapture::Sizes::sglang;
  if (replica.graph_capture_max_tokens >= 0) {
    g.max_tokens = replica.graph_capture_max_tokens;
  } else if (sglang) {
    // Sizes above the request pool (max_running_requests) are dropped and the
    // pool size itself captured (cuda_graph_runner.py).
    const double mib = memory_bytes(hw) / (1024.0 * 1024.0);
    g.max_tokens = std::min<int64_t>(sglang_default_max_bs(mib, tp), replica.scheduler.max_num_seqs);
  } else {
    g.max_tokens = std::min(2 * replica.scheduler.max_num_seqs, 512);  // vLLM's CompilationConfig default
  }
  return g;
}

}  // namespace twin
