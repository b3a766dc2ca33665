#include "planner/client_run.hpp"

#include <algorithm>

namespace twin {
namespace {

// Passes its inner clients through and counts what is in flight: each
// request handed out until its record ends. Apart from the clients, so the
// count checks them rather than repeating their own bookkeeping.
class InFlightMeter final : public ClientSource {
 public:
  explicit InFlightMeter(ClientSource& inner) : inner_(inner) {}
  Time next_due() override { return inner_.next_due(); }
  bool next(Request& out) override {
    if (!inner_.next(out)) return false;
    peak_ = std::max(peak_, ++in_flight_);
    return true;
  }
  void on_ended(const RequestRecord& record, Time now) override {
    --in_flight_;
    inner_.on_ended(record, now);
  }
  std::int64_t peak() const { return peak_; }

 private:
  ClientSource& inner_;
  std::int64_t in_flight_ = 0, peak_ = 0;
};

}  // namespace

ClientRun run_with_clients(const ClusterConfig& config, RequestSource& source, const ClientOptions& clients,
                           const RunOutputs& outputs) {
  ClientRun out;
  if (!clients.any()) {
    out.run = run_simulation(config, source, outputs);
    return out;
  }
  Clients sent(source, clients);
  // Clients with options always give a ClientSource (traces/clients.hpp).
  InFlightMeter meter(dynamic_cast<ClientSource&>(sent.source()));
  out.run = run_simulation(config, meter, outputs);
  out.peak_in_flight = meter.peak();
  return out;
}

}  // namespace twin
