// Decode step time against context length for four attention kinds of
// similar size (issue 41), priced by the roofline on one H100 in bf16: a
// full-attention model (grows with the context), a sliding-window one
// (bounded by its window), a latent-attention one (grows, at a fraction of
// the bytes) and linear-attention / Mamba hybrids (a small full-attention
// share grows; the state scans stay constant). 32 decodes per step.
#include <cstdio>
#include <utility>
#include <string>
#include <vector>

#include "hwprofiles/hardware_desc.hpp"
#include "models/hybrid_layers.hpp"
#include "models/model_desc.hpp"
#include "models/step_ops.hpp"
#include "sim/roofline_cost_model.hpp"

namespace {

using namespace twin;

// Mistral-7B v0.1 as published: a 4096-token window on every layer.
ModelDesc sliding_model() {
  ModelDesc m = resolve_model("mistral-7b");
  m.name = "mistral-7b (window 4096)";
  m.sliding_window = 4096;
  return m;
}

// Llama-3.1-8B's sizes with DeepSeek-V2-Lite's latent attention (a 512
// latent and a 64-wide rotary key cached per token; heads of 128 + 64).
ModelDesc latent_model() {
  ModelDesc m = resolve_model("llama-3.1-8b");
  m.name = "llama-3.1-8b + MLA (512+64)";
  m.kv_lora_rank = 512;
  m.qk_rope_head_dim = 64;
  m.qk_nope_head_dim = 128;
  m.v_head_dim = 128;
  m.head_dim = 192;
  m.num_key_value_heads = m.num_attention_heads;
  return m;
}

// Llama-3.1-8B's sizes with Qwen3-Next's layer mix: three Gated DeltaNet
// layers (16 key / 32 value heads of 128) to one full-attention layer.
ModelDesc linear_model() {
  ModelDesc m = resolve_model("llama-3.1-8b");
  m.name = "llama-3.1-8b + GDN 3:1";
  for (int64_t i = 0; i < m.num_hidden_layers; ++i)
    m.layer_attention.push_back((i + 1) % 4 == 0 ? LayerAttention::full : LayerAttention::linear);
  m.linear_num_key_heads = 16;
  m.linear_num_value_heads = 32;
  m.linear_key_head_dim = 128;
  m.linear_value_head_dim = 128;
  m.linear_conv_kernel_dim = 4;
  return m;
}

// The step's time, and its state scans' share (OpKind::state_scan), in ms.
std::pair<double, double> step_ms(RooflineCostModel& cost, int seqs, int64_t context) {
  BatchShape shape;
  for (int i = 0; i < seqs; ++i) shape.seqs.push_back(SeqShape{1, context, true});
  StepInput in;
  in.shape = &shape;
  std::vector<OpCost> ops;
  const double total = static_cast<double>(cost.stage_time(in, &ops)) / 1e6;
  double scan = 0;
  for (const OpCost& c : ops) scan += c.kind == OpKind::state_scan ? c.time_ns / 1e6 : 0.0;
  return {total, scan};
}

}  // namespace

int main() {
  const HardwareDesc hw = resolve_hardware("h100-80gb");
  const std::vector<ModelDesc> models = {resolve_model("llama-3.1-8b"), sliding_model(), latent_model(), linear_model(),
                                         resolve_model("nemotron-h-8b")};
  const char* scaling[] = {"grows: every layer reads the context", "bounded: flat past the window",
                           "reduced: 576 cached values a token and layer", "constant scans; grows in 8 of 32 layers",
                           "constant scans; grows in 4 of 52 layers"};
  const std::vector<int64_t> contexts = {1024, 4096, 16384, 65536, 131072};
  const int seqs = 32;
  std::printf("decode step time, ms, %d decodes on one H100 (roofline, bf16); x: against 1K context\n", seqs);
  std::printf("%-30s", "model");
  for (int64_t c : contexts) std::printf(" %9lldK", static_cast<long long>(c / 1024));
  std::printf("   x@128K  scan ms  scaling\n");
  for (std::size_t i = 0; i < models.size(); ++i) {
    const ModelDesc& m = models[i];
    RooflineCostModel cost(m, ParallelLayout{}, WeightPrecision(Dtype::bf16), Dtype::bf16,
                           roofline_params(hw, WeightPrecision(Dtype::bf16)));
    std::printf("%-30s", m.name.c_str());
    double first = 0, last = 0, scan_first = 0, scan_last = 0;
    for (int64_t c : contexts) {
      const auto [ms, scan] = step_ms(cost, seqs, c);
      if (first == 0) {
        first = ms;
        scan_first = scan;
      }
      last = ms;
      scan_last = scan;
      std::printf(" %10.2f", ms);
    }
    // The scans' time at 1K and at 128K: the same (no per-token cache).
    const std::string scans = scan_first > 0 ? std::to_string(scan_first).substr(0, 4) + "=" +
                                                   std::to_string(scan_last).substr(0, 4)
                                             : std::string("-");
    std::printf("   %6.2f  %-9s %s\n", last / first, scans.c_str(), scaling[i]);
  }
  std::printf("KV bytes per token / state per request (bf16):\n");
  for (const ModelDesc& m : models)
    std::printf("  %-30s %9lld B/token  %11lld B/request\n", m.name.c_str(),
                static_cast<long long>(kv_bytes_per_token(m, Dtype::bf16)),
                static_cast<long long>(state_bytes_per_request(m, Dtype::bf16)));
  return 0;
}
