#pragma once
// Prices ops of models/step_ops from a calibrated profile's tables. Shared by
// the simulator's calibrated cost model and the profiler (which fits the
// per-step overhead against these very predictions).
//
// Inside a table: piecewise linear in log(time) over log(x) (GEMM m,
// elementwise tokens; attention: log(new tokens per seq) between rows, and
// along a row log(context per seq) for decode, log(new + context per seq) for
// prefill, where the work grows with the KV length a query sees). Exact at the
// table's points, monotone between them.
// Beyond a table: anchored at the table's edge and scaled along the roofline,
// time x max(flops / F, bytes / B) of the query over that of the edge, with F
// and B the best FLOP and byte rates the profile measured. Such lookups are
// flagged so callers can count them.
#include <cstdint>
#include <string>
#include <vector>

#include "hwprofiles/calibrated_profile.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/step_ops.hpp"

namespace twin {

struct OpLookup {
  double time_ns = 0;         // one instance (multiply by op.repeat)
  bool out_of_range = false;  // extrapolated beyond the table
};

class CalibratedTables {
 public:
  // `origin` names the profile (its path) in errors.
  CalibratedTables(CalibratedProfile profile, std::string origin);

  // Throws twin::Error naming the op, its shape and the profile when no table
  // covers it (e.g. tp_allreduce, or a GEMM of another width).
  OpLookup op_time(const Op& op) const;
  // Per-step overhead (see StepOverhead) for a step with `num_seqs` scheduled
  // seqs that starts after the engine sat idle for `idle_ns`.
  double overhead_ns(std::int64_t num_seqs, double idle_ns = 0) const;
  // The factor on an op's table time inside a step: the profile's global
  // op_scale (version 1's fit; 1 in later profiles) times the op kind's own.
  double op_scale(OpKind kind) const {
    const auto k = static_cast<std::size_t>(kind);
    return profile_.overhead.op_scale * (k < profile_.overhead.op_scales.size() ? profile_.overhead.op_scales[k] : 1.0);
  }

  const CalibratedProfile& profile() const { return profile_; }
  const std::string& origin() const { return origin_; }
  double flops_per_ns() const { return flops_rate_; }
  double bytes_per_ns() const { return bytes_rate_; }

  // Prepared form of a table's points: logs of the interpolation coordinates.
  struct Curve {
    std::vector<double> u;      // interpolation coordinate (log)
    std::vector<double> x;      // as in the file
    std::vector<CalibratedPoint> points;
  };
  struct Grid {
    OpKind op{};
    std::int64_t heads = 0, head_dim = 0;
    std::vector<double> log_keys, keys;
    std::vector<Curve> rows;
  };
  struct Line {
    OpKind op{};
    std::int64_t n = 0, k = 0;
    Curve curve;
  };

 private:
  CalibratedProfile profile_;
  std::string origin_;
  std::vector<std::vector<Line>> lines_;  // by OpKind
  std::vector<std::vector<Grid>> grids_;  // by OpKind
  double flops_rate_ = 1, bytes_rate_ = 1;

  [[noreturn]] void missing(const Op& op) const;
};

// One step priced from the tables.
struct StepLookup {
  double ops_ns = 0;         // sum of op time x repeat, as the tables say
  double scaled_ops_ns = 0;  // the same with each op's scale (op_scale(kind)) applied
  double overhead_ns = 0;    // the profile's per-step overhead
  std::int64_t num_seqs = 0;
  std::int64_t out_of_range = 0;  // ops extrapolated beyond their table
  double total_ns() const { return scaled_ops_ns + overhead_ns; }
};

// Prices the ops of the step (stage `stage`) with step_ops, after `idle_ns`
// of idleness. `scratch` is reused. With `per_op`, appends (op, time of all
// its repeats, its scale applied) pairs.
StepLookup lookup_step(const CalibratedTables& tables, const ModelDesc& model, const BatchShape& batch,
                       const ParallelLayout& layout, Dtype weights, Dtype kv, int stage, std::vector<Op>& scratch,
                       std::vector<std::pair<Op, double>>* per_op = nullptr, double idle_ns = 0);

}  // namespace twin
