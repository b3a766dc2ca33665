#pragma once
// Where requests come from and where records go, for every way of serving a
// trace: the simulator's event loop and the engine's wall-clock loop pull
// arrivals from a RequestSource and push records to a RecordSink, so a trace
// reader, a generator, a rescaled copy or a test's list feeds either one,
// and one writer serves both.
#include <cstddef>
#include <utility>
#include <vector>

#include "engine/core/records.hpp"
#include "engine/core/request.hpp"

namespace twin {

class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The next request in arrival order; false at the end.
  virtual bool next(Request& out) = 0;
};

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void on_request(const RequestRecord& record) = 0;
  // Step records, when the loop was asked to pass them on (record_steps).
  virtual void on_step(const StepRecord&) {}
  // Every step of the run counted, all replicas: once, when the run ends,
  // whether or not step records were passed on.
  virtual void on_step_tally(const StepTally&) {}
};

// A source fed while the loop runs: a network front end's requests come when
// its clients send them, stamped with their arrival on the loop's clock.
// next() returning false means "none now" until closed(); the loop asks
// again after every event and whenever its clock's wait_for_input() returns
// (ServingLoop::run_live). A client that gives up is a cancel: the loop
// aborts its request ("cancelled") at the next instant.
class LiveRequestSource : public RequestSource {
 public:
  // True once next() will never give a request again (the front end stopped
  // admitting and every request it took has been handed out).
  virtual bool closed() = 0;
  // The next request, already handed out by next(), whose client gave up;
  // false if none.
  virtual bool next_cancel(RequestId& id) = 0;
};

// A source whose requests depend on how its earlier ones ended: clients
// that keep N requests in flight, chat sessions whose next turn waits for the
// answer (traces/clients.hpp). The loop asks when the next request is due
// after every request it takes and every one that ends, and takes it when its
// clock reaches that time; a due time may move earlier once a request ends,
// never before the loop's present.
class ClientSource : public RequestSource {
 public:
  // When the request next() would give is due: no earlier than the latest
  // time given to on_ended() or the latest request given; kNoTime while none
  // is (until another request ends, or for good).
  virtual Time next_due() = 0;
  // Gives the request due (next_due() != kNoTime), its arrival that due time.
  bool next(Request& out) override = 0;
  // A request this source gave ended (finished, aborted, rejected) at `now`.
  virtual void on_ended(const RequestRecord& record, Time now) = 0;
};

// A list of requests owned by the source (validation loads, floors, tests).
class VectorSource final : public RequestSource {
 public:
  explicit VectorSource(std::vector<Request> requests) : requests_(std::move(requests)) {}
  bool next(Request& out) override {
    if (next_ >= requests_.size()) return false;
    out = requests_[next_++];
    return true;
  }

 private:
  std::vector<Request> requests_;
  std::size_t next_ = 0;
};

}  // namespace twin
