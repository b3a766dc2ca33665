#include "planner/mpi_split.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "base/error.hpp"

#ifdef TWIN_HAVE_MPI
#include <mpi.h>
#endif

namespace twin {
namespace {
bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    if (std::getenv(var)) return true;
  }
  return false;
}
}  // namespace

#ifdef TWIN_HAVE_MPI
bool mpi_compiled_in() { return true; }

MpiSession::MpiSession() {
  if (!launched_by_mpi()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(nullptr, nullptr);
  active_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  if (active_) MPI_Finalize();
}

void MpiSession::abort(int code) const {
  if (active_) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

// Wire format per rank: a flat buffer of [index (8 bytes), length (8 bytes), bytes]...
std::vector<std::pair<std::size_t, std::string>> MpiSession::gather(
    const std::vector<std::pair<std::size_t, std::string>>& items) const {
  if (!active_ || size_ == 1) return items;
  std::string buffer;
  for (const auto& [index, text] : items) {
    const std::uint64_t header[2] = {index, text.size()};
    buffer.append(reinterpret_cast<const char*>(header), sizeof header);
    buffer += text;
  }
  const int length = static_cast<int>(buffer.size());
  std::vector<int> lengths(rank_ == 0 ? size_ : 0);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(lengths.size());
  std::string all;
  if (rank_ == 0) {
    int total = 0;
    for (int r = 0; r < size_; ++r) {
      offsets[r] = total;
      total += lengths[r];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(buffer.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::pair<std::size_t, std::string>> out;
  std::size_t pos = 0;
  while (pos + 16 <= all.size()) {
    std::uint64_t header[2];
    std::memcpy(header, all.data() + pos, sizeof header);
    pos += sizeof header;
    out.emplace_back(static_cast<std::size_t>(header[0]), all.substr(pos, header[1]));
    pos += header[1];
  }
  return out;
}
std::vector<std::string> MpiSession::all_gather(const std::string& mine) const {
  if (!active_ || size_ == 1) return {mine};
  if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw Error("MPI: a rank's message of " + std::to_string(mine.size()) + " bytes is over MPI's 2 GiB count limit");
  }
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_));
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> offsets(lengths.size());
  long long total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
    if (total > std::numeric_limits<int>::max()) {
      throw Error("MPI: one exchange of " + std::to_string(total) + " bytes is over MPI's 2 GiB count limit");
    }
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  out.reserve(lengths.size());
  for (std::size_t r = 0; r < lengths.size(); ++r) out.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  return out;
}
#else
bool mpi_compiled_in() { return false; }
std::vector<std::string> MpiSession::all_gather(const std::string& mine) const { return {mine}; }
MpiSession::MpiSession() {}
MpiSession::~MpiSession() {}
void MpiSession::abort(int code) const { std::exit(code); }
std::vector<std::pair<std::size_t, std::string>> MpiSession::gather(
    const std::vector<std::pair<std::size_t, std::string>>& items) const {
  return items;
}
#endif

}  // namespace twin
