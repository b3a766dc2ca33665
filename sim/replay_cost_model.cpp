#include "sim/replay_cost_model.hpp"

#include <algorithm>
#include <utility>

#include "base/error.hpp"
#include "metrics/step_csv.hpp"

namespace twin {

ReplayCostModel::ReplayCostModel(const std::vector<StepRecord>& steps, std::string origin) : origin_(std::move(origin)) {
  // Records are written as steps end; order each replica's by start (ties by
  // id) so the replay follows the order the steps were planned in.
  std::vector<const StepRecord*> sorted;
  sorted.reserve(steps.size());
  for (const StepRecord& s : steps) {
    if (s.replica < 0) throw Error(origin_ + ": step " + std::to_string(s.step_id) + " has a negative replica");
    if (s.duration <= 0) {
      throw Error(origin_ + ": step " + std::to_string(s.step_id) + " has duration " + std::to_string(s.duration) +
                  " ns; a step takes positive time");
    }
    sorted.push_back(&s);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const StepRecord* a, const StepRecord* b) {
    if (a->replica != b->replica) return a->replica < b->replica;
    if (a->start != b->start) return a->start < b->start;
    return a->step_id < b->step_id;
  });
  for (const StepRecord* s : sorted) {
    by_replica_[s->replica].steps.push_back(Recorded{s->duration, s->batch_size, s->new_tokens});
  }
}

ReplayCostModel ReplayCostModel::from_file(const std::string& steps_csv) {
  return ReplayCostModel(read_step_records(steps_csv), steps_csv);
}

Time ReplayCostModel::stage_time(const StepInput& step, std::vector<OpCost>*) {
  if (step.stage != 0) throw UsageError(origin_ + ": replay supports one pipeline stage (the engine runs pp=1)");
  const auto it = by_replica_.find(step.replica);
  const std::size_t k = it == by_replica_.end() ? 0 : it->second.next;
  if (it == by_replica_.end() || k >= it->second.steps.size()) {
    throw Error(origin_ + ": the simulation planned step " + std::to_string(k + 1) + " of replica " +
                std::to_string(step.replica) + " but the log has " +
                std::to_string(it == by_replica_.end() ? 0 : it->second.steps.size()) +
                " steps for it: the replay diverged from the recorded run");
  }
  const Recorded& rec = it->second.steps[k];
  if (step.plan != nullptr) {
    const auto batch = static_cast<std::int32_t>(step.plan->seqs.size());
    std::int64_t tokens = 0;
    for (const ScheduledSeq& s : step.plan->seqs) tokens += s.num_new;
    if (batch != rec.batch_size || tokens != rec.new_tokens) {
      throw Error(origin_ + ": replica " + std::to_string(step.replica) + " step " + std::to_string(k + 1) +
                  " diverged: the simulation planned " + std::to_string(batch) + " seqs / " + std::to_string(tokens) +
                  " new tokens, the log has " + std::to_string(rec.batch_size) + " / " +
                  std::to_string(rec.new_tokens));
    }
  }
  ++it->second.next;
  return rec.duration;
}

std::int64_t ReplayCostModel::remaining() const {
  std::int64_t left = 0;
  for (const auto& [replica, log] : by_replica_) left += static_cast<std::int64_t>(log.steps.size() - log.next);
  return left;
}

}  // namespace twin
