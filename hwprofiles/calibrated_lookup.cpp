#include "hwprofiles/calibrated_lookup.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "base/error.hpp"

namespace twin {
namespace {

using Curve = CalibratedTables::Curve;

// Value at a clamped coordinate, with the op's FLOPs and bytes there.
struct Sample {
  double time = 0, flops = 0, bytes = 0;
  bool clamped = false;
};

// Linear in logs where both ends are positive (times always are); FLOPs of
// an op without arithmetic (embed) are 0 and interpolate linearly.
double mix(double a, double b, double t) {
  if (t <= 0) return a;
  if (t >= 1) return b;
  if (a > 0 && b > 0) return std::exp(std::log(a) + t * (std::log(b) - std::log(a)));
  return a + t * (b - a);
}

Sample mix(const Sample& a, const Sample& b, double t) {
  return {mix(a.time, b.time, t), mix(a.flops, b.flops, t), mix(a.bytes, b.bytes, t), a.clamped || b.clamped};
}

Sample at_point(const CalibratedPoint& p, bool clamped) { return {p.time_ns, p.flops, p.bytes, clamped}; }

// Value of a curve at coordinate u (log), clamped to its ends.
Sample eval(const Curve& c, double u) {
  const std::size_t n = c.u.size();
  if (u <= c.u.front()) return at_point(c.points.front(), u < c.u.front());
  if (u >= c.u.back()) return at_point(c.points.back(), u > c.u.back());
  const auto hi = static_cast<std::size_t>(std::upper_bound(c.u.begin(), c.u.end(), u) - c.u.begin());
  const std::size_t lo = hi - 1;
  if (u == c.u[lo] || hi >= n) return at_point(c.points[lo], false);
  const double t = (u - c.u[lo]) / (c.u[hi] - c.u[lo]);
  return mix(at_point(c.points[lo], false), at_point(c.points[hi], false), t);
}

Curve make_curve(const std::vector<CalibratedPoint>& points, double shift) {
  Curve c;
  c.points = points;
  for (const CalibratedPoint& p : points) {
    c.x.push_back(p.x);
    c.u.push_back(std::log(p.x + shift));
  }
  return c;
}

std::string shape_text(const Op& op) {
  switch (table_kind(op.kind)) {
    case TableKind::gemm: return "n=" + std::to_string(op.n) + ", k=" + std::to_string(op.k);
    case TableKind::elementwise: return "n=" + std::to_string(op.n);
    case TableKind::attention: return "heads=" + std::to_string(op.n) + ", head_dim=" + std::to_string(op.k);
    default: return "";
  }
}

}  // namespace

CalibratedTables::CalibratedTables(CalibratedProfile profile, std::string origin)
    : profile_(std::move(profile)), origin_(std::move(origin)), lines_(kNumOpKinds), grids_(kNumOpKinds) {
  double best_flops = 0, best_bytes = 0;
  auto rates = [&](const CalibratedPoint& p) {
    best_flops = std::max(best_flops, p.flops / p.time_ns);
    best_bytes = std::max(best_bytes, p.bytes / p.time_ns);
  };
  for (const auto* section : {&profile_.gemm, &profile_.elementwise}) {
    for (const CurveTable& t : *section) {
      Line l;
      l.op = t.op;
      l.n = t.n;
      l.k = t.k;
      l.curve = make_curve(t.points, 0.0);
      for (const CalibratedPoint& p : t.points) rates(p);
      lines_[static_cast<int>(t.op)].push_back(std::move(l));
    }
  }
  for (const GridTable& t : profile_.attention) {
    Grid g;
    g.op = t.op;
    g.heads = t.heads;
    g.head_dim = t.head_dim;
    for (const GridRow& r : t.rows) {
      g.keys.push_back(r.key);
      g.log_keys.push_back(std::log(r.key));
      // Prefill work grows with the KV length its queries see (new + context).
      g.rows.push_back(make_curve(r.points, t.op == OpKind::attn_prefill ? r.key : 0.0));
      for (const CalibratedPoint& p : r.points) rates(p);
    }
    grids_[static_cast<int>(t.op)].push_back(std::move(g));
  }
  if (best_flops > 0) flops_rate_ = best_flops;
  if (best_bytes > 0) bytes_rate_ = best_bytes;
}

void CalibratedTables::missing(const Op& op) const {
  std::string have;
  const int i = static_cast<int>(op.kind);
  if (i >= 0 && i < kNumOpKinds) {
    for (const Line& l : lines_[i]) have += (have.empty() ? "" : "; ") + std::string("n=") + std::to_string(l.n) + (l.k ? ", k=" + std::to_string(l.k) : "");
    for (const Grid& g : grids_[i]) have += (have.empty() ? "" : "; ") + std::string("heads=") + std::to_string(g.heads) + ", head_dim=" + std::to_string(g.head_dim);
  }
  const std::string shape = shape_text(op);
  throw Error(origin_ + ": no table for op '" + std::string(op_name(op.kind)) + "'" +
              (shape.empty() ? "" : " at " + shape) + (have.empty() ? " (the profile has none for this op)" : " (the profile has " + have + ")") +
              "; calibrate the same model, dtype and layout (" + profile_.metadata.model + ", " +
              profile_.metadata.dtype + ", tp=" + std::to_string(profile_.metadata.tp) + ")");
}

OpLookup CalibratedTables::op_time(const Op& op) const {
  const int i = static_cast<int>(op.kind);
  if (i < 0 || i >= kNumOpKinds) missing(op);
  auto roofline = [&](double flops, double bytes) { return std::max(flops / flops_rate_, bytes / bytes_rate_); };
  // Anchored at the clamped sample, scaled by the roofline of query over anchor.
  auto finish = [&](const Sample& s, double q_flops, double q_bytes) {
    OpLookup r;
    r.time_ns = s.time;
    if (s.clamped) {
      r.out_of_range = true;
      const double anchor = roofline(s.flops, s.bytes);
      if (anchor > 0) r.time_ns = s.time * roofline(q_flops, q_bytes) / anchor;
    }
    return r;
  };
  switch (table_kind(op.kind)) {
    case TableKind::gemm:
    case TableKind::elementwise: {
      const bool gemm = table_kind(op.kind) == TableKind::gemm;
      for (const Line& l : lines_[i]) {
        if (l.n != op.n || (gemm && l.k != op.k)) continue;
        const double x = static_cast<double>(gemm ? op.m : op.tokens);
        if (x <= 0) return {};
        return finish(eval(l.curve, std::log(x)), op.flops, op.bytes);
      }
      missing(op);
    }
    case TableKind::attention: {
      for (const Grid& g : grids_[i]) {
        if (g.heads != op.n || g.head_dim != op.k) continue;
        if (op.num_seqs <= 0 || op.tokens <= 0) return {};
        const double seqs = static_cast<double>(op.num_seqs);
        const bool prefill = op.kind == OpKind::attn_prefill;
        // Prefill rows are per seq (the sum is priced as that many average
        // seqs); decode rows are whole batches.
        const double key = prefill ? static_cast<double>(op.tokens) / seqs : seqs;
        const double context = static_cast<double>(op.context) / seqs;
        const double q_flops = prefill ? op.flops / seqs : op.flops;
        const double q_bytes = prefill ? op.bytes / seqs : op.bytes;
        auto row_at = [&](std::size_t r) {
          const double shift = prefill ? g.keys[r] : 0.0;
          return eval(g.rows[r], std::log(std::max(context + shift, 1e-9)));
        };
        const double lk = std::log(key);
        Sample s;
        if (lk <= g.log_keys.front()) {
          s = row_at(0);
          s.clamped = s.clamped || lk < g.log_keys.front();
        } else if (lk >= g.log_keys.back()) {
          s = row_at(g.rows.size() - 1);
          s.clamped = s.clamped || lk > g.log_keys.back();
        } else {
          const auto hi = static_cast<std::size_t>(std::upper_bound(g.log_keys.begin(), g.log_keys.end(), lk) -
                                                   g.log_keys.begin());
          const std::size_t lo = hi - 1;
          if (lk == g.log_keys[lo]) {
            s = row_at(lo);
          } else {
            const double t = (lk - g.log_keys[lo]) / (g.log_keys[hi] - g.log_keys[lo]);
            s = mix(row_at(lo), row_at(hi), t);
          }
        }
        OpLookup r = finish(s, q_flops, q_bytes);
        if (prefill) r.time_ns *= seqs;
        return r;
      }
      missing(op);
    }
    default:
      missing(op);
  }
}

double CalibratedTables::overhead_ns(std::int64_t num_seqs, double idle_ns) const {
  const StepOverhead& o = profile_.overhead;
  double t = o.base_ns + o.per_seq_ns * static_cast<double>(num_seqs);
  if (o.idle_tau_ns > 0 && idle_ns > 0) t += o.idle_ns * -std::expm1(-idle_ns / o.idle_tau_ns);
  return t;
}

StepLookup lookup_step(const CalibratedTables& tables, const ModelDesc& model, const BatchShape& batch,
                       const ParallelLayout& layout, Dtype weights, Dtype kv, int stage, std::vector<Op>& scratch,
                       std::vector<std::pair<Op, double>>* per_op, double idle_ns) {
  StepLookup s;
  scratch.clear();
  step_ops(model, batch, layout, weights, kv, stage, scratch);
  if (scratch.empty()) return s;
  for (const SeqShape& q : batch.seqs) s.num_seqs += q.new_tokens > 0 ? 1 : 0;
  // Each timed op the step runs adds its fixed cost once, to its first op.
  const OpTimes& fixed = tables.profile().overhead.op_fixed_ns;
  std::array<bool, kNumTimedOps> charged{};
  const bool moe = model.is_moe();
  for (const Op& op : scratch) {
    const OpLookup l = tables.op_time(op);
    const double t = l.time_ns * op.repeat;
    double scaled = t * tables.op_scale(op.kind);
    if (const int k = timed_op_of(op.kind, moe); k >= 0 && !charged[static_cast<std::size_t>(k)]) {
      charged[static_cast<std::size_t>(k)] = true;
      scaled += fixed[static_cast<std::size_t>(k)];
    }
    s.ops_ns += t;
    s.scaled_ops_ns += scaled;
    s.out_of_range += l.out_of_range ? 1 : 0;
    if (per_op) per_op->emplace_back(op, scaled);
  }
  s.overhead_ns = tables.overhead_ns(s.num_seqs, idle_ns);
  return s;
}

}  // namespace twin
