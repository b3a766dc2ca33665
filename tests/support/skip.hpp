#pragma once
// A test case that cannot run here (no TWIN_BIN, no mpirun, no AVX2...) says
// so and stops: TWIN_SKIP("why") prints a Catch2 warning carrying the marker
// TWIN_TEST_SKIPPED, which twin_add_test's SKIP_REGULAR_EXPRESSION turns into
// a skip in ctest's summary instead of a pass. Catch2 v2 has no SKIP of its
// own (v3's SKIP does this). Use it at the top of a TEST_CASE, before any
// check: a case that skips must have checked nothing.
#include <catch2/catch.hpp>

#define TWIN_SKIP(why)                     \
  do {                                     \
    WARN("TWIN_TEST_SKIPPED: " << why);    \
    return;                                \
  } while (false)
