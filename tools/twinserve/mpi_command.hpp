#pragma once
// A subcommand that may run under mpirun (plan, simulate): one place that
// knows how its ranks fail together.
#include <functional>

#include "planner/mpi_split.hpp"

namespace twin::cli {

// Runs body on this process's MPI session. Alone (no mpirun, or one rank)
// errors propagate as usual. Under K ranks, ranks fail alike on bad input
// and on exchanged errors, so rank 0 alone reports a UsageError (exit 2);
// any other failure is reported by its rank (exit 1); either ends every rank
// rather than leave the others waiting in a collective. An Interrupted (a
// stop the ranks agreed on, thrown after their last collective) leaves as
// it does alone: exit 128 + the signal, no abort.
void run_mpi_command(const std::function<void(MpiSession&)>& body);

}  // namespace twin::cli
