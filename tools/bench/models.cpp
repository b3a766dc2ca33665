// Speed of step_ops, which the simulator calls once per simulated step and
// stage: µs per call for decode-heavy and mixed batches.
#include <chrono>
#include <cstdio>
#include <vector>

#include "models/model_desc.hpp"
#include "models/step_ops.hpp"

int main() {
  using namespace twin;
  using Clock = std::chrono::steady_clock;
  struct Case {
    const char* model;
    int seqs;
    ParallelLayout layout;
  };
  const Case cases[] = {{"llama-3.1-8b", 256, {1, 1}},
                        {"llama-3.1-70b", 256, {8, 1}},
                        {"llama-3.1-405b", 256, {8, 2}},
                        {"mixtral-8x7b", 256, {2, 1}},
                        {"llama-3.1-8b", 16, {1, 1}}};
  std::vector<Op> out;
  out.reserve(32);
  double sink = 0;
  for (const auto& c : cases) {
    const ModelDesc m = resolve_model(c.model);
    check_layout(m, c.layout);
    BatchShape batch;
    for (int i = 0; i < c.seqs; ++i)  // every 16th seq is a 512-token prompt chunk
      batch.seqs.push_back(i % 16 == 0 ? SeqShape{512, 0, false} : SeqShape{1, 200 + 7 * i, true});
    const int iters = 200'000;
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      out.clear();
      step_ops(m, batch, c.layout, Dtype::bf16, Dtype::bf16, i % c.layout.pp, out);
      sink += out.back().flops;
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
    std::printf("step_ops %-15s seqs=%-4d tp=%d pp=%d  %.3f us/call  (%zu ops)\n", c.model, c.seqs,
                c.layout.tp, c.layout.pp, us, out.size());
  }
  std::printf("(checksum %.3g)\n", sink);
  return 0;
}
