#pragma once
// The requests a validation serves: the trace's first max_requests (0: all),
// read as `validate` and `validate --measured` both read them.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/request.hpp"
#include "traces/trace_reader.hpp"

namespace twin {

// Throws Error naming the trace when it holds no request.
std::vector<Request> read_trace_requests(const std::string& trace, const TraceReadOptions& read,
                                         std::int64_t max_requests);

}  // namespace twin
