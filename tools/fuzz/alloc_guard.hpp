#pragma once
// A cap on any single allocation while the fuzz driver runs an input: a
// reader that sizes a buffer from a number in its input (a length of 2^31, a
// count of 10^12) throws std::bad_alloc here, deterministically, instead of
// taking the machine's memory. The driver reports it as a failure: readers
// must refuse such numbers before allocating. Replaces the global operator
// new, so it is linked into the twin_fuzz executable only.
#include <cstddef>

namespace twin::fuzz {

// 0: no cap (the default until the driver sets one).
void set_allocation_cap(std::size_t bytes);
// The largest request refused since the last call, then reset to 0.
std::size_t take_refused_allocation();

}  // namespace twin::fuzz
