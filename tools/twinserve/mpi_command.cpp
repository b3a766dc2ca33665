#include "tools/twinserve/mpi_command.hpp"

#include <exception>
#include <iostream>

#include "base/error.hpp"
#include "tools/twinserve/interrupt_guard.hpp"

namespace twin::cli {

void run_mpi_command(const std::function<void(MpiSession&)>& body) {
  MpiSession mpi;
  if (!mpi.active() || mpi.size() == 1) {
    body(mpi);
    return;
  }
  int code = 0;
  try {
    body(mpi);
  } catch (const Interrupted&) {
    // A stop the ranks agreed on, after their last collective: each rank
    // that stopped exits as one process does (128 + the signal), its files
    // whole; no abort, which would kill the ranks still writing.
    throw;
  } catch (const UsageError& e) {
    if (mpi.rank() == 0) std::cerr << "twinserve: error: " << e.what() << "\n";
    code = 2;
  } catch (const std::exception& e) {
    std::cerr << "twinserve: error (rank " << mpi.rank() << "): " << e.what() << "\n";
    code = 1;
  }
  if (code != 0) mpi.abort(code);
}

}  // namespace twin::cli
