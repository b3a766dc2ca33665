#pragma once
// Runs fn(i) for every index in `indices` on `jobs` threads. Each call owns
// its result slot, so the outcome does not depend on the thread count.
#include <cstddef>
#include <functional>
#include <vector>

namespace twin {

// jobs <= 0: the hardware's threads. The first exception thrown by fn is
// rethrown after every thread has stopped. `on_done(done, total)`, if given,
// is called after each fn returns, one call at a time (progress lines).
using ProgressFn = std::function<void(std::size_t done, std::size_t total)>;
void parallel_for(const std::vector<std::size_t>& indices, int jobs, const std::function<void(std::size_t)>& fn,
                  const ProgressFn& on_done = {});
int default_jobs();

}  // namespace twin
