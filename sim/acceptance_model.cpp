#include "sim/acceptance_model.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace twin {
namespace {

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from the request, the position of the proposal and the seed.
double uniform(std::uint64_t seed, RequestId id, std::int64_t position) {
  std::uint64_t h = mix(seed + 0x9E3779B97F4A7C15ULL);
  h = mix(h ^ static_cast<std::uint64_t>(id));
  h = mix(h ^ static_cast<std::uint64_t>(position));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

}  // namespace

RateAcceptance::RateAcceptance(double alpha, std::uint64_t seed) : alpha_(alpha), seed_(seed) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) {
    throw UsageError("speculative config: acceptance rate " + std::to_string(alpha) + " must be in [0, 1]");
  }
}

void RateAcceptance::draw(std::int32_t, const StepPlan& plan, std::vector<std::int32_t>& accepted) {
  for (std::size_t j = 0; j < plan.seqs.size(); ++j) {
    const ScheduledSeq& q = plan.seqs[j];
    if (q.num_lookahead <= 0) continue;
    // The proposal at KV position p is drawn from (seed, id, p): a request
    // that returns to the same position (after a preemption) draws alike.
    const std::int64_t first = static_cast<std::int64_t>(q.num_computed) + q.num_new - q.num_lookahead;
    std::int32_t a = 0;
    while (a < q.num_lookahead && uniform(seed_, q.id, first + a) < alpha_) ++a;
    accepted[j] = a;
  }
}

ReplayAcceptance::ReplayAcceptance(const std::vector<StepRecord>& steps, std::string origin)
    : records_(steps), origin_(std::move(origin)) {
  std::vector<const StepRecord*> sorted;
  for (const StepRecord& s : records_) sorted.push_back(&s);
  std::stable_sort(sorted.begin(), sorted.end(), [](const StepRecord* a, const StepRecord* b) {
    if (a->replica != b->replica) return a->replica < b->replica;
    if (a->start != b->start) return a->start < b->start;
    return a->step_id < b->step_id;
  });
  for (const StepRecord* s : sorted) by_replica_[s->replica].steps.push_back(s);
}

void ReplayAcceptance::draw(std::int32_t replica, const StepPlan& plan, std::vector<std::int32_t>& accepted) {
  // The replay cost model consumes one record per planned step; so does
  // this, for every planned step (with lookahead or not), to stay in step.
  const auto it = by_replica_.find(replica);
  if (it == by_replica_.end() || it->second.next >= it->second.steps.size()) {
    throw Error(origin_ + ": the simulation planned a step of replica " + std::to_string(replica) +
                " beyond the log's: the replay diverged from the recorded run");
  }
  const StepRecord& rec = *it->second.steps[it->second.next++];
  std::size_t k = 0;
  for (std::size_t j = 0; j < plan.seqs.size(); ++j) {
    const ScheduledSeq& q = plan.seqs[j];
    if (q.num_lookahead <= 0) continue;
    if (k >= rec.lookahead.size() || rec.lookahead[k] != q.num_lookahead) {
      throw Error(origin_ + ": replica " + std::to_string(replica) + " step " + std::to_string(rec.step_id) +
                  " diverged: the simulation verifies " + std::to_string(q.num_lookahead) +
                  " proposals for its seq " + std::to_string(k + 1) + " with lookahead, the log " +
                  (k < rec.lookahead.size() ? std::to_string(rec.lookahead[k]) : std::string("none")));
    }
    accepted[j] = rec.accepted[k++];
  }
  if (k != rec.lookahead.size()) {
    throw Error(origin_ + ": replica " + std::to_string(replica) + " step " + std::to_string(rec.step_id) +
                " diverged: the log has " + std::to_string(rec.lookahead.size()) + " seqs with lookahead, the plan " +
                std::to_string(k));
  }
}

bool has_recorded_acceptance(const std::vector<StepRecord>& steps) {
  return std::any_of(steps.begin(), steps.end(), [](const StepRecord& s) { return !s.lookahead.empty(); });
}

double measured_acceptance_rate(const std::vector<StepRecord>& steps, const std::string& origin) {
  double accepted = 0, rejections = 0;
  for (const StepRecord& s : steps) {
    for (std::size_t i = 0; i < s.accepted.size() && i < s.lookahead.size(); ++i) {
      accepted += s.accepted[i];
      rejections += s.accepted[i] < s.lookahead[i] ? 1 : 0;
    }
  }
  if (accepted + rejections <= 0) {
    throw Error(origin + ": no step recorded speculative proposals (lookahead_accepted); "
                "record an engine run with --speculative-config");
  }
  return accepted / (accepted + rejections);
}

}  // namespace twin
