#include "sim/engine_traits.hpp"

#include <algorithm>
#include <iterator>

namespace twin {
namespace {

constexpr OpKindSet kAllFourLinear = op_kind_bit(OpKind::qkv_proj) | op_kind_bit(OpKind::o_proj) |
                                     op_kind_bit(OpKind::gate_up_proj) | op_kind_bit(OpKind::down_proj);

// One row per engine, the source of every figure beside it, so the rows
// are compared (and reviewed for drift) in one place.
constexpr EngineTraits kEngines[] = {
    {
        .preset = "vllm",  // vLLM v1, 0.11 to 0.19
        .graph_sizes = GraphSizes::vllm,
        // per_sample: Scheduler.update_from_output on decode batches, 0.287
        // ms at 256 requests and 0.142 ms at 128 (vLLM PR #46112's
        // micro-benchmark): 1.1 us per sampling request (D). per_seq:
        // schedule() and the persistent batch's per-request updates, about
        // one update_from_output each (E). per_token: input preparation is
        // vectorised over tokens (numpy), 0.05 us (E). exposed: 0, under
        // async scheduling input preparation and sampling overlap the
        // forward pass (vLLM PR #23569) (R).
        .host = {2.0, 0.05, 1.1, 0.0},
        // Inductor's fusion passes put the quantisation of RMSNorm's and
        // SiLU-and-mul's outputs into those kernels; the attention output's
        // (fuse_attn_quant) is off at every optimisation level, so o_proj's
        // input is quantised by a kernel of its own (vLLM
        // docs/design/fusions.md).
        .separate_fp8_input_quant = op_kind_bit(OpKind::o_proj),
        // all_reduce_utils.py CUSTOM_ALL_REDUCE_MAX_SIZES (vLLM PR #24111
        // turned torch symmetric memory on by default in 0.11).
        .symmetric_memory_all_reduce = true,
        // One flash_attn_varlen_func per batch (vllm/v1/attention/backends/
        // flash_attn.py); FlashAttention 2's paged split-KV kernel tiles
        // queries 64 rows at a time (run_mha_fwd_splitkv_dispatch, kBlockM).
        .mixed_attention_tile_rows = 64,
    },
    {
        .preset = "vllm-v0",
        .graph_sizes = GraphSizes::vllm,
        // Sampling, input preparation, output processing and the scheduler
        // together about 20 ms per step at batch 200 (vLLM issue #6801):
        // 100 us per sequence (D), split evenly between per-sequence and
        // per-sample work (E: no split published); Python lists per token
        // in prepare_input: 0.2 us (E).
        .host = {50.0, 0.2, 50.0, 0.0},
        // The fp8 linear method runs eagerly: scaled_fp8_quant before every
        // fp8 GEMM.
        .separate_fp8_input_quant = kAllFourLinear,
        // v0 ran prefill and decode attention as two calls.
    },
    {
        .preset = "sglang",
        .graph_sizes = GraphSizes::sglang,  // cuda_graph_runner.py, server_args.py
        // No published per-request figure; a Python scheduler over a
        // persistent batch as vLLM v1's, so vLLM v1's figures (E). Its
        // overlap scheduler leaves no GPU idle time between decode batches
        // (SGLang v0.4 blog's Nsight profile): exposed 0 (R).
        .host = {2.0, 0.05, 1.1, 0.0},
        // Per-token quant before every fp8 GEMM, no graph compiler.
        .separate_fp8_input_quant = kAllFourLinear,
        // Prefill and decode batches apart by default (no mixed steps).
    },
    {
        .preset = "trtllm",  // TensorRT-LLM's PyTorch executor
        .graph_sizes = GraphSizes::vllm,
        // host_step_time 45.11 ms per iteration at max_batch_size 1536 per
        // attention-DP rank (TensorRT-LLM PR #10273, GB200, GPT-OSS-120B):
        // 29 us per sequence, all of the step's host work (D; no split into
        // sampling published). Overlap scheduler: exposed 0 (R, its docs).
        .host = {29.0, 0.05, 0.0, 0.0},
        // Its fp8 RMSNorm, attention and activation kernels write fp8: none.
        // Context and generation attention run as separate kernels.
    },
};

}  // namespace

const EngineTraits* engine_traits(std::string_view preset) {
  const auto it = std::find_if(std::begin(kEngines), std::end(kEngines),
                               [&](const EngineTraits& e) { return e.preset == preset; });
  return it == std::end(kEngines) ? nullptr : &*it;
}

}  // namespace twin
