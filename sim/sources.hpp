#pragma once
// Request sources the simulator pulls arrivals from: a trace file (streamed)
// or the seeded generator (tests, benchmarks).
#include <cstdint>
#include <string>

#include "sim/simulator.hpp"
#include "traces/generator.hpp"
#include "traces/trace_reader.hpp"

namespace twin {

class TraceSource final : public RequestSource {
 public:
  // max_requests > 0 stops after that many.
  TraceSource(const std::string& path, const TraceReadOptions& options, std::int64_t max_requests = 0)
      : reader_(path, options), max_requests_(max_requests) {}
  bool next(Request& out) override {
    if (max_requests_ > 0 && count_ >= max_requests_) return false;
    if (!reader_.next(out)) return false;
    ++count_;
    return true;
  }
  const TraceReader& reader() const { return reader_; }

 private:
  TraceReader reader_;
  std::int64_t max_requests_;
  std::int64_t count_ = 0;
};

class GeneratorSource final : public RequestSource {
 public:
  explicit GeneratorSource(const GeneratorOptions& options) : generator_(options) {}
  bool next(Request& out) override { return generator_.next(out); }

 private:
  TraceGenerator generator_;
};

}  // namespace twin
