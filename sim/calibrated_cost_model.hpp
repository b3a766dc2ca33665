#pragma once
// The calibrated cost model: every op of models/step_ops priced from the
// tables `twinserve calibrate` measured on the engine (hwprofiles/
// calibrated_lookup: log-log interpolation inside a table, roofline-shaped
// extrapolation beyond it, counted), plus the measured per-step overhead.
//   stage time = sum over ops of scale(kind) x table(op) x repeat
//                + each timed op's fixed cost once + base + per_seq x seqs
//                + the idle warm-up
// (hwprofiles/calibrated_lookup's lookup_step, the profiler's own view).
// A profile is for one model at one dtype and layout: anything else is an
// error naming both, never a silently wrong number.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hwprofiles/calibrated_lookup.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "sim/cost_model.hpp"

namespace twin {

// Reads a profile file (twin::Error naming the path when missing or bad).
std::shared_ptr<const CalibratedTables> load_calibrated_tables(const std::string& path);

// The dtypes a group runs with a profile: a dtype the group leaves empty
// takes the profile's; one it names must equal the profile's (UsageError
// naming both otherwise).
void apply_profile_dtypes(const CalibratedTables& tables, const std::string& group_dtype,
                          const std::string& group_kv_dtype, Dtype& weights, Dtype& kv);

class CalibratedCostModel final : public CostModel {
 public:
  // Throws UsageError when the profile was measured for another model or
  // dtype (naming both), or when tp/pp > 1 meets a profile measured at tp=1 on
  // the CPU. `kv_block_bytes` prices swap copies at the profile's best byte rate.
  CalibratedCostModel(std::shared_ptr<const CalibratedTables> tables, ModelDesc model, ParallelLayout layout,
                      Dtype weights, Dtype kv, double kv_block_bytes);

  Time stage_time(const StepInput& step, std::vector<OpCost>* breakdown = nullptr) override;
  Time swap_time(std::int64_t num_blocks) override;
  bool splits_steps() const override { return true; }

  // Ops priced beyond their table so far (this model).
  std::int64_t out_of_range() const { return out_of_range_; }
  // The same over every calibrated model of the process (the CLI reports it
  // after run_simulation, which owns the models).
  static std::int64_t out_of_range_total() { return total_out_of_range_.load(); }

  const CalibratedTables& tables() const { return *tables_; }

 private:
  std::shared_ptr<const CalibratedTables> tables_;
  ModelDesc model_;
  ParallelLayout layout_;
  Dtype weights_, kv_;
  double kv_block_bytes_ = 0;
  std::vector<Op> ops_;  // reused every step
  std::vector<std::pair<Op, double>> per_op_;  // each op and its priced time, reused
  std::int64_t out_of_range_ = 0;
  static inline std::atomic<std::int64_t> total_out_of_range_{0};
};

}  // namespace twin
