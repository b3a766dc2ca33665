#pragma once
// `twinserve sweep`: a grid of simulations over cluster-config keys (the
// cartesian product of every --vary), one row per point. A generic tool for
// policy studies: chunk size, block size, prefix caching, router, TP, ...
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "planner/capacity.hpp"
#include "planner/loaded_trace.hpp"
#include "planner/thread_pool.hpp"
#include "sim/cluster_config.hpp"
#include "traces/clients.hpp"

namespace twin {

struct VaryAxis {
  std::string key;
  std::vector<std::string> values;
};

// "key=v1,v2,..."; UsageError naming the text otherwise.
VaryAxis parse_vary(std::string_view text);

// Keys: the cluster config's top-level keys (router, seed,
// gpu_memory_utilization, num_gpu_blocks_override), its group keys (model,
// hardware, dtype, kv_dtype, tp, pp, ep, dp, count, alias replicas: set on
// every group), preset, max_concurrency (the clients' cap: traces/clients.hpp), any scheduler / KV option set_replica_option takes (also as
// scheduler.KEY), and rate_scale (arrivals divided by it). Throws UsageError
// naming the key (with the known ones) or a bad value, before anything runs.
void check_vary_axes(const ClusterConfig& base, const std::vector<VaryAxis>& axes);

// The config of one grid point (values[i] for axes[i]) and its rate scale.
ClusterConfig apply_vary(const ClusterConfig& base, const std::vector<VaryAxis>& axes,
                         const std::vector<std::string>& values, double& rate_scale);

struct SweepPoint {
  std::vector<std::string> values;  // one per axis
  std::string error;                // the point could not run (e.g. a layout that does not divide the heads)
  std::int32_t replicas = 0, gpus = 0;
  double cost_per_hour = 0;
  ProbeResult result;               // SLO verdict and latency statistics
  double itl_p99_ms = 0;
  double request_throughput = 0, goodput = 0, prefix_cache_hit_rate = 0;
  std::uint64_t num_requests = 0, preemptions = 0;
  bool has_slos = false;
  // Energy (docs/outputs.md, "Energy"); NaN where not known.
  double average_power_w = 0, joules_per_output_token = 0;
};

struct SweepOptions {
  std::size_t max_requests = 0;  // first requests of the trace (0: all)
  int jobs = 0;
  ProgressFn progress;  // (points done, points) after each point
  // How every point's requests are sent (none: at their times); an axis
  // max_concurrency sets the cap point by point.
  ClientOptions clients;
  // sweep's Ctrl-C. `stop` is asked before each point starts (from any
  // thread): true leaves the points not started unrun. `stop_running` is
  // asked at every turn of a running point's simulation (sim/run.hpp's
  // RunOutputs::stop): true stops it, and that point is left out too. A
  // stopped sweep returns the points finished only, in grid order.
  std::function<bool()> stop, stop_running;
};

// The number of points of the grid: the product of the axes' value counts.
std::size_t grid_size(const std::vector<VaryAxis>& axes);

// `base` with the point's max_concurrency axis value, if it has one
// (UsageError naming --max-concurrency for a value that is not a positive integer).
ClientOptions client_options_at(const ClientOptions& base, const std::vector<VaryAxis>& axes,
                                const std::vector<std::string>& values);

// Points in grid order: the first axis varies slowest (after a stop, those
// finished only: fewer than grid_size(axes)).
std::vector<SweepPoint> run_sweep(const ClusterConfig& base, const std::vector<VaryAxis>& axes, const LoadedTrace& trace,
                                  const SweepOptions& options);

void write_sweep_csv(std::ostream& out, const std::vector<VaryAxis>& axes, const std::vector<SweepPoint>& points);
void print_sweep_table(std::ostream& out, const std::vector<VaryAxis>& axes, const std::vector<SweepPoint>& points);

// One line naming the overloaded points (simulate's warning held: the
// queue grew all along), then one line per axis whose values changed no figure: every point that
// differs from another only on that axis has the same row (a knob the trace
// or configuration does not exercise, e.g. prefix caching without prefix
// hash ids). Points that failed are left out.
std::vector<std::string> sweep_warnings(const std::vector<VaryAxis>& axes, const std::vector<SweepPoint>& points);

}  // namespace twin
