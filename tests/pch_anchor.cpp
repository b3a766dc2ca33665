// Anchors the precompiled Catch2 header that every test executable reuses.
#include <catch2/catch.hpp>
