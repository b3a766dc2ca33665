#pragma once
// Waiting for an instant the way a serving loop should: a sleeping thread
// wakes tens to hundreds of microseconds late (timer slack, the OS
// scheduler), and that lateness lands in the next step's latency; on small
// models it dwarfs the step itself. So sleep until shortly before the
// instant and spin, yielding the core, for the rest.
#include <chrono>

namespace twin {

// Returns at or just after `until` (at once if it has passed).
void wait_until(std::chrono::steady_clock::time_point until);

}  // namespace twin
