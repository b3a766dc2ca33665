#pragma once
// The processes a windowed run is spread over (`mpirun -n K twinserve
// simulate ...`, docs/simulate.md "Router refresh"): replica i runs on rank
// i mod K; at each router refresh the ranks swap what the router and the
// writers need. The simulator sees only this interface; the command line
// gives it one over MPI (planner/mpi_split.hpp), so sim/ links no MPI.
#include <string>
#include <vector>

namespace twin {

class RankGroup {
 public:
  virtual ~RankGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank passes its bytes and gets every rank's, in rank order.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
};

}  // namespace twin
