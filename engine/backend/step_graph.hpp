#pragma once
// Step graphs (CUDA graphs): the ops of a decode step recorded once and
// replayed as one launch, so a step of a few hundred small kernels does not
// pay a launch each (vLLM captures its decode steps the same way). Plain
// data at the backend seam; the protocol is on Backend::begin_step_graph.
#include <compare>
#include <cstdint>

namespace twin {

// What one recorded graph is for. Every pass under a key stages host data of
// the same sizes (the runner pads the step to `rows`) and lays attention out
// for `max_context` keys per row, so the recorded kernels' arguments hold
// for any step the key admits. `owner` tells apart runners sharing a
// backend (each has its own activations and KV cache).
struct StepGraphKey {
  const void* owner = nullptr;
  std::int32_t rows = 0;         // query rows: one per sequence, padded
  std::int32_t max_context = 0;  // keys a row may attend to, at most
  auto operator<=>(const StepGraphKey&) const = default;
};

// The three passes of the protocol.
enum class StepGraphPass {
  warm,    // run eagerly in the key's layout: grows every workspace the graph will use
  record,  // capture the ops; nothing runs
  replay,  // stage the ops' host data, launch nothing; end_step_graph launches the graph
};

}  // namespace twin
