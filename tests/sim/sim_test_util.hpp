#pragma once
// Helpers shared by the simulator tests.
#include <vector>

#include "base/error.hpp"
#include "sim/cluster.hpp"
#include "sim/run.hpp"
#include "sim/sources.hpp"

namespace twin::test {

inline ClusterConfig one_group(const std::string& model, const std::string& hw, int tp = 1, int pp = 1,
                               int count = 1, const std::string& dtype = "") {
  ClusterConfig c;
  ReplicaGroupConfig g;
  g.model = model;
  g.hardware = hw;
  g.tp = tp;
  g.pp = pp;
  g.count = count;
  g.dtype = dtype;
  c.groups.push_back(g);
  return c;
}

inline BatchShape decode_batch(int batch, int context) {
  BatchShape s;
  for (int i = 0; i < batch; ++i) s.seqs.push_back(SeqShape{1, context, true});
  return s;
}

// Stage time of the first stage for a shape, with the breakdown.
inline Time price(CostModel& model, const BatchShape& shape, std::vector<OpCost>* breakdown = nullptr,
                  int stage = 0) {
  StepPlan plan;
  StepInput in{&plan, &shape, 0, stage};
  return model.stage_time(in, breakdown);
}

// Collects records in memory.
struct CollectSink : RecordSink {
  std::vector<RequestRecord> requests;
  std::vector<StepRecord> steps;
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  void on_step(const StepRecord& s) override { steps.push_back(s); }
};

// Requests from a vector the test fills.
struct ListSource : RequestSource {
  std::vector<Request> requests;
  std::size_t next_index = 0;
  bool next(Request& out) override {
    if (next_index >= requests.size()) return false;
    out = requests[next_index++];
    return true;
  }
};

}  // namespace twin::test
