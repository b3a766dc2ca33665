#pragma once
// Runs fn(i) for every index in `indices` on `jobs` threads. Each call owns
// its result slot, so the outcome does not depend on the thread count.
#include <cstddef>
#include <functional>
#include <vector>

namespace twin {

// jobs <= 0: the hardware's threads. The first exception thrown by fn is
// rethrown after every thread has stopped.
void parallel_for(const std::vector<std::size_t>& indices, int jobs, const std::function<void(std::size_t)>& fn);
int default_jobs();

}  // namespace twin
