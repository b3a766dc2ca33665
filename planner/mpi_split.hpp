#pragma once
// Spreading work over MPI ranks (`mpirun -n K twinserve plan ...`). Built
// with TWIN_MPI; MPI is only initialised when the process was started by a
// launcher (Open MPI / PMIx environment), so a plain run never touches it.
#include <string>
#include <vector>

namespace twin {

class MpiSession {
 public:
  MpiSession();   // MPI_Init when launched under mpirun
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool active() const { return active_; }
  // Gathers every rank's (index, text) items on rank 0, which gets all of
  // them (its own included); other ranks get an empty list.
  std::vector<std::pair<std::size_t, std::string>> gather(const std::vector<std::pair<std::size_t, std::string>>& items) const;
  // Every rank passes its bytes and gets every rank's, in rank order (one
  // rank, or no launcher: just its own).
  std::vector<std::string> all_gather(const std::string& mine) const;
  // Ends every rank (after an error on one of them).
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0, size_ = 1;
  bool active_ = false;
};

bool mpi_compiled_in();

}  // namespace twin
