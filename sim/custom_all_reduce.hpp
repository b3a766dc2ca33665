#pragma once
// When an engine all-reduces a TP group with its own kernel instead of
// NCCL. vLLM, SGLang and TensorRT-LLM each carry an all-reduce over peer
// memory (CUDA IPC buffers, one- or two-shot) that beats NCCL on small
// messages: a decode step's all-reduces are tens of KiB to a few MiB, where
// NCCL pays a fixed 20-40 us per call and these kernels 5-10 us. Pricing
// every call as NCCL made TP decode at small batches slow by up to a
// quarter (issue 38). The rules, read from the engines' sources, are in
// docs/engines.md, "TP all-reduce".
#include "engine/core/replica.hpp"
#include "sim/topology.hpp"

namespace twin {

// vLLM's custom all-reduce buffer (CustomAllreduce max_size, 8 MiB); the
// SGLang and TensorRT-LLM presets use the same bound.
inline constexpr double kCustomAllReduceBufferBytes = 8.0 * 1024 * 1024;

// Messages smaller than this many bytes go through the engine's own
// kernel on `ring`; 0: none do (NCCL prices every call). vLLM's rule: the
// preset's custom_all_reduce is on, the group has 2, 4, 6 or 8 GPUs, and
// they are all joined by NVLink (a switch, or a bridged pair), or they are
// two GPUs on PCIe that reach each other's memory (`pcie_p2p`); never
// across nodes. The bound is the 8 MiB buffer; the vllm preset (vLLM 0.11
// on, torch symmetric memory on) caps it at 512 KiB for 6 GPUs and 256 KiB
// for 8, where symmetric memory takes the larger messages.
double custom_all_reduce_below(const ReplicaConfig& replica, const RingCost& ring, bool pcie_p2p);

}  // namespace twin
