#pragma once
// One simulation from a cluster config and a request source to the outputs
// (requests.csv, steps.csv, summary.json) and the summary: what
// `twinserve simulate` runs, callable from tests and benchmarks.
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/collector.hpp"
#include "metrics/result_files.hpp"
#include "metrics/summary.hpp"
#include "sim/cluster.hpp"
#include "sim/cluster_config.hpp"
#include "sim/simulator.hpp"

namespace twin {

// Where a simulation stands, for a progress line.
struct SimProgress {
  double virtual_s = 0;       // the virtual clock
  std::int64_t arrivals = 0;  // requests taken in so far
  std::int64_t ended = 0;     // requests ended (finished, rejected, aborted)
};

struct RunOutputs {
  std::string out_dir;       // empty: write no files
  bool overwrite = false;    // replace result files already in out_dir
  // Which steps steps.csv keeps and whether the CSVs are compressed
  // (metrics/result_files.hpp); the summary is the same whatever they say.
  ResultFileOptions files;
  // Completed requests whose TTFT, TPOT and E2EL are kept one by one (exact
  // percentiles); past it, histograms (metrics/collector.hpp).
  std::uint64_t exact_percentile_requests = CollectorOptions::kDefaultExactRequests;
  // An MPI rank other than 0 (out_dir empty there) whose replicas' step
  // records rank 0 writes into its steps.csv: they are passed on all the same.
  bool steps_for_root = false;
  // Called every few thousand events while the simulation runs, and once
  // when it ends; the simulator itself prints nothing (the command line
  // draws the line, only on a terminal).
  std::function<void(const SimProgress&)> progress;
  // Asked at every turn of the loop: true stops the run (the command's
  // Ctrl-C); the requests in flight end as "interrupted", the files are
  // written whole and summary.json's config says "interrupted": true.
  // With a router refresh period, asked once per refresh, on every MPI
  // rank; any rank's stop stops all at the same refresh (Simulator::set_stop).
  std::function<bool()> stop;
  bool vllm_result = false;  // also vllm_result.json (metrics/vllm_result.hpp), with out_dir
  // Issue 44: $/kWh and g CO2/kWh for the summary's energy (0: not given).
  double energy_price_per_kwh = 0;
  double carbon_g_per_kwh = 0;
  // Threads between router refreshes (config.router_refresh_s > 0; 1
  // otherwise): the result files are the same bytes for any number.
  int jobs = 1;
  // MPI ranks sharing the replicas (docs/simulate.md, "Router refresh"); null:
  // this process runs them all. Give out_dir on rank 0 only: it alone gets records.
  RankGroup* ranks = nullptr;
  // Every request record and every step record kept (files.steps says
  // which) as they leave the run, beside the files: how the Python module
  // builds its tables without a CSV round trip (docs/python.md). Steps are
  // recorded when on_step is set, with or without out_dir.
  std::function<void(const RequestRecord&)> on_request;
  std::function<void(const StepRecord&)> on_step;
};

struct RunResult {
  Summary summary;
  SimStats stats;
  double wall_time_s = 0;
  std::uint64_t csv_bytes = 0;  // requests.csv + steps.csv on disk, as written (compressed or not)
};

// A one-line description per group ("4 x llama-3.1-8b (bf16) on h100-80gb, tp=1 pp=1, 30000 KV blocks of 16 tokens").
std::string describe_cluster(const Cluster& cluster);

// The config echo for summary.json: the config as given, plus what was
// resolved (KV blocks and memory plan per group).
nlohmann::ordered_json config_echo(const ClusterConfig& config, const Cluster& cluster);

// How a built cluster is served, for every caller that runs its Simulator
// (run_simulation here, validate's replays): the router, the disaggregated
// pools and the data-parallel lockstep the cluster resolved, the config's
// seed; and the router's refresh period (UsageError if out of range).
// Threads, MPI ranks and step recording stay the caller's.
SimOptions cluster_sim_options(const ClusterConfig& config, const Cluster& cluster);
WindowOptions cluster_window_options(const ClusterConfig& config);

// Throws UsageError / Error as build_cluster, the SLO parser and the source do.
// `extra_echo` keys (e.g. the trace path) are added to the config echo.
RunResult run_simulation(const ClusterConfig& config, RequestSource& source, const RunOutputs& outputs,
                         const nlohmann::ordered_json& extra_echo = nlohmann::ordered_json::object());

}  // namespace twin
