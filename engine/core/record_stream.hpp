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
  virtual void on_step(const StepRecord&) {}
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
