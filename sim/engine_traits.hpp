#pragma once
// What the engine a scheduler preset stands for does beyond the scheduling
// knobs the core holds (docs/engines.md), one row per engine: the CUDA-graph
// sizes it pads decode steps to, its host work per step, the fp8 inputs it
// quantises in kernels of their own, whether torch symmetric memory takes
// the large TP all-reduces from its custom kernel, and the query tile its
// attention kernel pads a mixed step's decodes to. The modules that price
// each behaviour (graph_capture, host_work, input_quant_kernels,
// custom_all_reduce, mixed_attention) read the row; this file is the one
// place that says which engine does what, with the source of each figure.
// A preset without a row (sarathi, orca, static, dynamic, lightllm) has no
// engine of its own.
#include <cstdint>
#include <string_view>

#include "sim/input_quant_kernels.hpp"

namespace twin {

// Whose capture-size list a CUDA graph is padded to (sim/graph_capture.hpp).
enum class GraphSizes { vllm, sglang };

// Host work per item, in microseconds on the hosts the engine's published
// profiles ran on (sim/host_work.hpp).
struct EngineHostFigures {
  double per_seq_us = 0;
  double per_token_us = 0;
  double per_sample_us = 0;
  double exposed_us = 0;
};

struct EngineTraits {
  std::string_view preset;
  GraphSizes graph_sizes = GraphSizes::vllm;
  EngineHostFigures host;
  // W8A8 fp8 linear layers whose input the engine quantises separately.
  OpKindSet separate_fp8_input_quant = 0;
  // Symmetric memory takes the TP all-reduces above a per-world-size bound
  // from the custom kernel (vLLM >= 0.11).
  bool symmetric_memory_all_reduce = false;
  // Query rows a decode is padded to when its attention shares one varlen
  // call with a prefill chunk, on the devices where the engine's default
  // attention backend does that (sim/mixed_attention.hpp); 0: never.
  std::int32_t mixed_attention_tile_rows = 0;
};

// The row of the engine `preset` stands for; nullptr for a preset without one.
const EngineTraits* engine_traits(std::string_view preset);

}  // namespace twin
