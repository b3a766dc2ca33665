#include "sim/explain_ops.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/core/step_plan.hpp"
#include "sim/roofline_cost_model.hpp"

namespace twin {
namespace {

struct NamedShape {
  std::string label;
  BatchShape shape;
};

constexpr const char* kShapeForms =
    "expected P (a prompt of P tokens), BxC (B decodes after C cached tokens) or parts joined by '+' in one step";

std::int64_t parse_count(const std::string& text, const std::string& item) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v < 1 || v > (1LL << 30))
    throw UsageError("--explain-ops: bad shape '" + excerpt(item) + "'; " + kShapeForms);
  return v;
}

// One part of a step, "P" or "BxC", added to `s`; `item` names it in errors.
void add_part(const std::string& part, const std::string& item, NamedShape& s) {
  if (!s.label.empty()) s.label += " + ";
  const auto x = part.find('x');
  if (x == std::string::npos) {
    const std::int64_t p = parse_count(part, item);
    s.label += "prefill of " + std::to_string(p) + " tokens";
    s.shape.seqs.push_back(SeqShape{p, 0, true});
    return;
  }
  const std::int64_t b = parse_count(part.substr(0, x), item), c = parse_count(part.substr(x + 1), item);
  if (b > 65536) throw UsageError("--explain-ops: at most 65536 decodes in '" + excerpt(item) + "'");
  s.label += std::to_string(b) + " decodes after " + std::to_string(c) + " cached tokens";
  for (std::int64_t i = 0; i < b; ++i) s.shape.seqs.push_back(SeqShape{1, c, true});
}

std::vector<NamedShape> parse_shapes(const std::string& shapes) {
  std::vector<NamedShape> out;
  std::stringstream ss(shapes);
  std::string item;
  while (std::getline(ss, item, ',')) {
    NamedShape s;
    if (item.empty() || item.front() == '+' || item.back() == '+' || item.find("++") != std::string::npos)
      throw UsageError("--explain-ops: bad shape '" + excerpt(item) + "'; " + kShapeForms);
    // "P+BxC": a chunk and decodes in one step, as a mixed batch runs.
    std::stringstream parts(item);
    std::string part;
    while (std::getline(parts, part, '+')) add_part(part, item, s);
    if (s.shape.seqs.empty()) throw UsageError("--explain-ops: bad shape '" + excerpt(item) + "'; " + kShapeForms);
    out.push_back(std::move(s));
  }
  if (out.empty()) throw UsageError("--explain-ops: no shapes given");
  return out;
}

// The step's host work, where the cost model prices it (the roofline):
// its terms and whether it hid behind the GPU (sim/host_work.hpp).
std::string explain_host(CostModel& model, const StepInput& in) {
  const auto* roofline = dynamic_cast<const RooflineCostModel*>(&model);
  if (!roofline) return {};
  const HostWork& w = roofline->params().host;
  const HostCost c = roofline->host_cost_of(in);
  char line[512];
  std::snprintf(line, sizeof line,
                "    host work (%s): %.2f us = fixed %.2f + %.3f/seq + %.4f/token + %.3f/sample us, %s; "
                "never hidden %.2f us\n",
                w.engine.c_str(), c.host_ns / 1e3, w.fixed_ns / 1e3, w.per_seq_ns / 1e3, w.per_token_ns / 1e3,
                w.per_sample_ns / 1e3,
                w.overlap ? "overlapped with the GPU back to back (async scheduling)" : "added to the GPU time",
                c.exposed_ns / 1e3);
  return line;
}

// The token count the step runs at as a captured CUDA graph, or eager
// (sim/graph_capture.hpp), where the cost model pads (the roofline).
std::string explain_graph(CostModel& model, const BatchShape& shape) {
  const auto* roofline = dynamic_cast<const RooflineCostModel*>(&model);
  if (!roofline) return {};
  const StepSums sums = step_sums(roofline->model(), shape);
  const std::int64_t tokens = sums.tokens(), padded = roofline->graph_tokens(sums);
  const bool decode_only = sums.prefill.tokens == 0;
  const GraphCapture& g = roofline->params().graph_capture;
  const char* sizes = g.sizes == GraphCapture::Sizes::sglang ? "SGLang's" : "vLLM's";
  char line[256];
  if (g.max_tokens <= 0) return "    CUDA graph: none (eager)\n";
  const bool sglang_prefill = g.sizes == GraphCapture::Sizes::sglang && !decode_only;
  if (tokens > g.max_tokens || sglang_prefill) {
    std::snprintf(line, sizeof line, "    CUDA graph: none (eager: %s graphs hold %s up to %lld)\n", sizes,
                  g.sizes == GraphCapture::Sizes::sglang ? "decode batches" : "steps", static_cast<long long>(g.max_tokens));
  } else {
    std::snprintf(line, sizeof line, "    CUDA graph: %lld tokens run as a graph of %lld (%s capture sizes, largest %lld)\n",
                  static_cast<long long>(tokens), static_cast<long long>(padded), sizes, static_cast<long long>(g.max_tokens));
  }
  return line;
}

}  // namespace

std::string explain_ops(Cluster& cluster, const std::string& shapes) {
  const std::vector<NamedShape> list = parse_shapes(shapes);
  std::string out;
  char line[512];
  for (std::size_t i = 0; i < cluster.groups.size(); ++i) {
    const GroupPlan& g = cluster.groups[i];
    CostModel& model = *cluster.replicas.at(static_cast<std::size_t>(g.first_replica)).cost_model;
    out += "group " + std::to_string(i) + ": " + g.model.name + " (" + std::string(dtype_name(g.dtype)) +
           (g.precision.quantized() ? ", " + std::string(quant_method_name(g.precision.quant.method)) + " " +
                                          std::string(g.precision.quant.kernel)
                                    : std::string()) +
           ") on " +
           g.hardware.name + ", tp=" + std::to_string(g.layout.tp) + " pp=" + std::to_string(g.layout.pp) +
           (g.layout.ep > 1 ? " ep=" + std::to_string(g.layout.ep) : std::string()) + " (first stage)\n";
    for (const NamedShape& s : list) {
      StepPlan plan;
      StepInput in{&plan, &s.shape, g.first_replica, 0};
      std::vector<OpCost> ops;
      const Time total = model.stage_time(in, &ops);
      std::snprintf(line, sizeof line, "  %s: %.3f ms (with the host work)\n", s.label.c_str(), static_cast<double>(total) / 1e6);
      out += line;
      out += explain_host(model, in);
      out += explain_graph(model, s.shape);
      // The curve column as wide as its longest name (per-op GEMM curves
      // run to 25 characters), so the efficiencies line up.
      int curve_width = 14;
      for (const OpCost& c : ops) curve_width = std::max(curve_width, static_cast<int>(c.curve.size()));
      std::snprintf(line, sizeof line, "    %-16s %6s %12s %12s %8s  %-*s %s\n", "op", "repeat", "each us", "total us", "bound",
                    curve_width, "curve", "efficiency");
      out += line;
      for (const OpCost& c : ops) {
        // A collective is bound by its link, priced by formula or curve.
        const bool link = c.curve == "link" || c.kind == OpKind::tp_allreduce || c.kind == OpKind::tp_gather ||
                          c.kind == OpKind::ep_dispatch || c.kind == OpKind::ep_combine || c.kind == OpKind::pp_send;
        std::snprintf(line, sizeof line, "    %-16s %6d %12.2f %12.2f %8s  %-*s %s\n", std::string(op_name(c.kind)).c_str(),
                      c.repeat, c.time_ns / c.repeat / 1e3, c.time_ns / 1e3,
                      link ? "link" : c.curve.empty() ? "-" : c.compute_bound ? "compute" : "memory", curve_width,
                      c.curve.empty() ? "-" : std::string(c.curve).c_str(),
                      c.efficiency > 0 ? std::to_string(c.efficiency).substr(0, 5).c_str() : "-");
        out += line;
      }
    }
  }
  return out;
}

}  // namespace twin
