#include "validate/trace_requests.hpp"

#include "base/error.hpp"

namespace twin {

std::vector<Request> read_trace_requests(const std::string& trace, const TraceReadOptions& read,
                                         std::int64_t max_requests) {
  TraceReader reader(trace, read);
  std::vector<Request> out;
  Request r;
  while ((max_requests <= 0 || static_cast<std::int64_t>(out.size()) < max_requests) && reader.next(r)) {
    out.push_back(r);
  }
  if (out.empty()) throw Error(trace + ": the trace has no requests to validate with");
  return out;
}

}  // namespace twin
