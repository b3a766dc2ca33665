#pragma once
// The measured runs a bench reads (../shared/measured by default): each
// folder holding meta.json and `needs`, in name order, handed to `run` with
// the twinserve binary beside the bench and a working folder. Absent: the
// bench says it skipped. A run that fails prints why; the others go on.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <vector>

namespace twin::bench {

using MeasuredRunFn = std::function<void(const std::filesystem::path& twinserve, const std::filesystem::path& run,
                                         const std::filesystem::path& work)>;

inline int for_each_measured_run(const char* bench, int argc, char** argv, const char* needs, const MeasuredRunFn& run) {
  namespace fs = std::filesystem;
  const fs::path bin = fs::absolute(fs::path(argv[0])).parent_path() / "twinserve";
  const fs::path root = argc > 1 ? fs::path(argv[1]) : fs::path("../shared/measured");
  const fs::path work = fs::absolute(argc > 2 ? fs::path(argv[2]) : fs::path(std::string(bench) + "_out"));
  if (!fs::is_directory(root)) {
    std::printf("%s: skipped, no measured runs at %s\n", bench, root.c_str());
    return 0;
  }
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (fs::exists(e.path() / "meta.json") && fs::exists(e.path() / needs)) runs.push_back(e.path());
  }
  std::sort(runs.begin(), runs.end());
  int failed = 0;
  for (const fs::path& r : runs) {
    try {
      run(bin, r, work);
    } catch (const std::exception& e) {
      std::printf("== %s: %s\n", r.filename().c_str(), e.what());
      ++failed;
    }
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace twin::bench
