#pragma once
// What `twinserve plan` writes: the ranked table (stdout), plan.json,
// plan.csv, pareto.csv and, when gnuplot is installed, frontier.svg and
// capacity.svg (tools/plot/plan.gp). No wall times in the files: the same
// inputs give the same bytes whatever the threads or MPI ranks.
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/planner.hpp"

namespace twin {

nlohmann::ordered_json plan_json(const PlanResult& plan, const PlanOptions& options);
void write_plan_csv(std::ostream& out, const PlanResult& plan);
void write_pareto_csv(std::ostream& out, const PlanResult& plan);
// The ranked table, the chosen configuration, or why nothing qualifies.
void print_plan(std::ostream& out, const PlanResult& plan);

// Result files of a plan in an output folder.
const std::vector<std::string>& plan_files();
// Writes plan.json, plan.csv, pareto.csv into dir (OutputDir rules: an
// existing result file needs overwrite), then the plots. Returns a note on
// the plots ("wrote frontier.svg, capacity.svg" or why not).
std::string write_plan_outputs(const std::string& dir, bool overwrite, bool plots, const PlanResult& plan,
                               const PlanOptions& options);

// Runs gnuplot on `script` with `dir` as its data and output folder; false
// (and a reason) when gnuplot is missing or fails.
bool run_gnuplot(const std::string& script, const std::string& dir, std::string& why);
// tools/plot/plan.gp as built into the binary.
const char* plan_plot_script();

}  // namespace twin
