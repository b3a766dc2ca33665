#include "sim/simulator.hpp"

#include <string>
#include <utility>

#include "base/error.hpp"
#include "sim/virtual_clock.hpp"

namespace twin {
namespace {

std::vector<VirtualClock::Pricing> pricing_of(const std::vector<SimReplicaSpec>& specs) {
  std::vector<VirtualClock::Pricing> out;
  out.reserve(specs.size());
  for (const SimReplicaSpec& spec : specs) {
    if (spec.config.scheduler.num_speculative_tokens > 0 && !spec.acceptance) {
      throw UsageError("simulator: a replica speculates (num_speculative_tokens " +
                       std::to_string(spec.config.scheduler.num_speculative_tokens) +
                       ") but has no acceptance model: give acceptance_rate, acceptance_length or acceptance_from");
    }
    if (!spec.config.kv.tiers.empty() && !spec.tiers) {
      throw UsageError("simulator: a replica has KV tiers below HBM but no model pricing their transfers");
    }
    out.push_back(VirtualClock::Pricing{spec.cost_model, spec.pipeline_stages, spec.acceptance, spec.tiers});
  }
  return out;
}

}  // namespace

struct Simulator::State {
  SimOptions options;
  VirtualClock clock;
  std::vector<Replica> replicas;

  State(const std::vector<SimReplicaSpec>& specs, SimOptions opts, std::shared_ptr<KvTransferModel> transfers)
      : options(std::move(opts)), clock(pricing_of(specs), transfers) {
    if (specs.empty()) throw UsageError("simulator: the cluster has no replicas");
    for (const SimReplicaSpec& spec : specs) {
      if (spec.config.role != ReplicaRole::mixed && !transfers) {
        throw UsageError("simulator: prefill and decode pools need a KV transfer model");
      }
    }
    replicas.reserve(specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) replicas.emplace_back(specs[i].config, static_cast<std::int32_t>(i));
  }
};

Simulator::Simulator(std::vector<SimReplicaSpec> replicas, SimOptions options,
                     std::shared_ptr<KvTransferModel> transfers)
    : state_(std::make_unique<State>(replicas, std::move(options), std::move(transfers))) {}
Simulator::~Simulator() = default;

std::int32_t Simulator::num_replicas() const { return static_cast<std::int32_t>(state_->replicas.size()); }
Time Simulator::tier_load_stall() const { return state_->clock.tier_load_stall(); }

const Replica& Simulator::replica(std::int32_t index) const { return state_->replicas.at(index); }

SimStats Simulator::run(RequestSource& source, RecordSink& sink) {
  ServingLoop<VirtualClock> loop(state_->replicas, state_->clock, state_->options);
  return loop.run(source, sink);
}

}  // namespace twin
