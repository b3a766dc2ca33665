#pragma once
// The price of a fixed-state mixer's scan (Gated DeltaNet linear attention,
// Mamba-2) in one step on one GPU: step_ops' state_scan op. Unlike
// attention it reads no per-token cache, so its cost does not grow with the
// context: a decode reads and writes each request's state once per layer; a
// prefill runs the chunked scan over its new tokens.
#include <cstdint>

#include "models/hybrid_layers.hpp"
#include "models/step_ops.hpp"

namespace twin {

// `seqs` requests with `tokens` new tokens in all; decode: one token each.
// Decode (vLLM's fused recurrent kernels): per token and head, the state
// update and the readout, about 6 flops per state value (decay, rank-one
// update and, for the delta rule, its correction, then the output
// product), plus the causal convolution's kernel x channels; bytes: the
// state and the convolution window read and written per request, the
// mixer's inputs read and its output written.
// Prefill (chunked scans: fla's chunk_gated_delta_rule, Mamba-2's SSD):
// per token and head, the intra-chunk products (2 x chunk x (rows + cols))
// and the state terms (6 x rows x cols); bytes: the inputs and output, the
// per-chunk states written and read back in fp32 (seqs + tokens / chunk
// chunks: at most one chunk per request over), and each request's initial
// and final state. `act`: bytes per activation; `state_bytes`: per state value.
Op state_scan_op(const MixerShape& s, int64_t seqs, int64_t tokens, bool prefill, double act, double state_bytes,
                 int64_t repeat);

}  // namespace twin
