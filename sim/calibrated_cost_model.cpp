#include "sim/calibrated_cost_model.hpp"

#include <cmath>
#include <utility>

#include "base/error.hpp"

namespace twin {

std::shared_ptr<const CalibratedTables> load_calibrated_tables(const std::string& path) {
  return std::make_shared<const CalibratedTables>(load_calibrated_profile(path), path);
}

void apply_profile_dtypes(const CalibratedTables& tables, const std::string& group_dtype,
                          const std::string& group_kv_dtype, Dtype& weights, Dtype& kv) {
  const ProfileMetadata& m = tables.profile().metadata;
  auto adopt = [&](const std::string& given, const std::string& measured, const char* what, Dtype& out) {
    const Dtype d = parse_dtype(measured);
    if (!given.empty() && parse_dtype_or_auto(given).value_or(d) != d) {
      throw UsageError(tables.origin() + ": the profile was measured with " + what + " " + measured +
                       ", the group asks for " + given + " (leave it unset to use the profile's)");
    }
    out = d;
  };
  adopt(group_dtype, m.dtype, "dtype", weights);
  adopt(group_kv_dtype, m.kv_dtype, "kv_dtype", kv);
}

CalibratedCostModel::CalibratedCostModel(std::shared_ptr<const CalibratedTables> tables, ModelDesc model,
                                         ParallelLayout layout, Dtype weights, Dtype kv, double kv_block_bytes)
    : tables_(std::move(tables)), model_(std::move(model)), layout_(layout), weights_(weights), kv_(kv),
      kv_block_bytes_(kv_block_bytes) {
  check_layout(model_, layout_);
  const ProfileMetadata& m = tables_->profile().metadata;
  const std::string& origin = tables_->origin();
  if (m.model != model_.name) {
    throw UsageError(origin + ": the profile was measured for model '" + excerpt(m.model, 80) + "' (" + m.dtype +
                     "), the group runs '" + model_.name + "' (" + std::string(dtype_name(weights_)) +
                     "); calibrate that model");
  }
  if (parse_dtype(m.dtype) != weights_ || parse_dtype(m.kv_dtype) != kv_) {
    throw UsageError(origin + ": the profile was measured for " + excerpt(m.model, 80) + " at dtype " + m.dtype + ", KV " +
                     m.kv_dtype + "; the group runs " + model_.name + " at dtype " + std::string(dtype_name(weights_)) +
                     ", KV " + std::string(dtype_name(kv_)));
  }
  if ((layout_.tp != m.tp || layout_.pp != 1) && m.backend == "cpu") {
    throw UsageError(origin + ": the profile was measured on the CPU backend at tp=" + std::to_string(m.tp) +
                     ", pp=1; the group runs tp=" + std::to_string(layout_.tp) + ", pp=" + std::to_string(layout_.pp) +
                     " (the CPU engine has no collectives to measure)");
  }
  ops_.reserve(32);
}

Time CalibratedCostModel::stage_time(const StepInput& step, std::vector<OpCost>* breakdown) {
  // lookup_step prices the step as the profiler's fit and validate's per-op
  // table do: each op's table time x its kind's scale, each timed op's
  // fixed cost once, and the step terms.
  per_op_.clear();
  const StepLookup l = lookup_step(*tables_, model_, *step.shape, layout_, weights_, kv_, step.stage, ops_, &per_op_,
                                   static_cast<double>(step.idle_ns));
  if (ops_.empty()) return 0;
  for (const auto& [op, t] : per_op_) {
    // Energy: the op's binding roof by the best rates the tables saw.
    const bool compute_bound = op.flops / tables_->flops_per_ns() > op.bytes / tables_->bytes_per_ns();
    if (step.mix) (compute_bound ? step.mix->compute_ns : step.mix->memory_ns) += t;
    if (breakdown) {
      OpCost c;
      c.kind = op.kind;
      c.time_ns = t;
      c.flops = op.flops * op.repeat;
      c.bytes = op.bytes * op.repeat;
      c.comm_bytes = op.comm_bytes * op.repeat;
      c.repeat = op.repeat;
      c.compute_bound = compute_bound;
      breakdown->push_back(c);
    }
  }
  if (l.out_of_range > 0) {
    out_of_range_ += l.out_of_range;
    total_out_of_range_ += l.out_of_range;
  }
  // A step takes at least 1 ns (a negative fitted overhead cannot undo that).
  return std::max<Time>(1, priced_ns(l.total_ns(), "calibrated cost model: a step", &tables_->origin()));
}

Time CalibratedCostModel::swap_time(std::int64_t num_blocks) {
  if (num_blocks <= 0) return 0;
  // Not measured: a read and a write of the blocks at the best byte rate seen.
  const double bytes = 2.0 * kv_block_bytes_ * static_cast<double>(num_blocks);
  return priced_ns(bytes / tables_->bytes_per_ns(), "calibrated cost model: a KV swap", &tables_->origin());
}

}  // namespace twin
