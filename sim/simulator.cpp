#include "sim/simulator.hpp"

#include <string>
#include <utility>

#include "base/error.hpp"
#include "sim/replica_pricing.hpp"
#include "sim/virtual_clock.hpp"
#include "sim/windowed_simulator.hpp"

namespace twin {

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
                     std::shared_ptr<KvTransferModel> transfers, WindowOptions window) {
  if (window.router_refresh < 0) throw UsageError("simulator: the router refresh period must not be negative");
  if (window.router_refresh > 0) {
    windowed_ = std::make_unique<WindowedSimulator>(std::move(replicas), std::move(options), window.router_refresh,
                                                    window.jobs, window.more_specs, window.ranks);
    return;
  }
  if (window.ranks && window.ranks->size() > 1) {
    throw UsageError(std::to_string(window.ranks->size()) +
                     " MPI ranks need a router refresh period > 0 (--router-refresh-s, cluster key "
                     "router_refresh_s): at 0 the router reads every replica at each arrival");
  }
  if (window.jobs != 1) {
    throw UsageError("--jobs " + std::to_string(window.jobs) +
                     " needs a router refresh period > 0 (--router-refresh-s, cluster key router_refresh_s): at 0 "
                     "the router reads every replica at each arrival, so no replica can run ahead of another");
  }
  state_ = std::make_unique<State>(replicas, std::move(options), std::move(transfers));
}
Simulator::~Simulator() = default;

std::int32_t Simulator::num_replicas() const {
  return windowed_ ? windowed_->num_replicas() : static_cast<std::int32_t>(state_->replicas.size());
}
Time Simulator::tier_load_stall() const {
  return windowed_ ? windowed_->tier_load_stall() : state_->clock.tier_load_stall();
}

const Replica& Simulator::replica(std::int32_t index) const {
  return windowed_ ? windowed_->replica(index) : state_->replicas.at(index);
}

void Simulator::set_stop(std::function<bool()> stop) {
  if (windowed_) {
    windowed_->set_stop(std::move(stop));
  } else {
    state_->clock.set_stop(std::move(stop));
  }
}

SimStats Simulator::run(RequestSource& source, RecordSink& sink) {
  if (windowed_) {
    if (dynamic_cast<ClientSource*>(&source)) {
      throw UsageError(
          "closed-loop clients (--max-concurrency, --request-rate inf, --sessions) need a router refresh period of 0 "
          "(--router-refresh-s, cluster key router_refresh_s; so no --jobs > 1 and no MPI ranks): with a period the "
          "replicas advance apart between refreshes, so a request that ends on one cannot send its client's next "
          "request to another at that instant");
    }
    return windowed_->run(source, sink);
  }
  ServingLoop<VirtualClock> loop(state_->replicas, state_->clock, state_->options);
  return loop.run(source, sink);
}

}  // namespace twin
