#pragma once
// Basic vocabulary of the serving core. Time is integer nanoseconds on
// whatever clock the caller drives (wall clock in the engine, virtual clock in
// the simulator): policy code never reads a clock itself.
#include <cstdint>

namespace twin {

using Time = std::int64_t;  // nanoseconds
using RequestId = std::int64_t;
using TokenId = std::int32_t;
using BlockId = std::int32_t;
using BlockHash = std::uint64_t;

inline constexpr Time kNoTime = -1;
inline constexpr Time kNsPerUs = 1'000;
inline constexpr Time kNsPerMs = 1'000'000;
inline constexpr Time kNsPerSec = 1'000'000'000;

// One block copy an executor performs (or a cost model prices): swapping a
// request's KV between device and host, or moving blocks within one pool.
struct BlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
};

constexpr double to_seconds(Time t) { return static_cast<double>(t) / 1e9; }
constexpr double to_millis(Time t) { return static_cast<double>(t) / 1e6; }
constexpr Time from_seconds(double s) { return static_cast<Time>(s * 1e9 + (s >= 0 ? 0.5 : -0.5)); }
constexpr Time from_millis(double ms) { return static_cast<Time>(ms * 1e6 + (ms >= 0 ? 0.5 : -0.5)); }

}  // namespace twin
