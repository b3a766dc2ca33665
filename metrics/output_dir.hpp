#pragma once
// Where a run writes its results. Creating DIR is fine; replacing a result
// file a previous run (or the user) left there needs overwrite = true.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace twin {

inline const std::vector<std::string> kResultFiles = {"requests.csv", "steps.csv", "summary.json"};

class OutputDir {
 public:
  // Creates dir (and parents). Throws twin::UsageError if any of `files`
  // already exists in it and overwrite is false, naming the file and the
  // option; twin::Error if dir is not a directory, cannot be created or is
  // not writable.
  OutputDir(std::filesystem::path dir, bool overwrite,
            const std::vector<std::string>& files = kResultFiles);

  const std::filesystem::path& path() const { return dir_; }
  // Opens dir/name for writing (binary, truncating); throws twin::Error on failure.
  std::ofstream open(const std::string& name) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace twin
