#include "metrics/output_dir.hpp"

#include <system_error>

#include "base/error.hpp"

namespace twin {

OutputDir::OutputDir(std::filesystem::path dir, bool overwrite, const std::vector<std::string>& files)
    : dir_(std::move(dir)) {
  std::error_code ec;
  if (std::filesystem::exists(dir_, ec) && !std::filesystem::is_directory(dir_, ec)) {
    throw Error(dir_.string() + ": exists and is not a directory");
  }
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error(dir_.string() + ": cannot create the output directory: " + ec.message());
  {
    // Found now, not after a model has loaded and a run has been served.
    const auto probe = dir_ / ".twinserve-write-probe";
    const bool writable = static_cast<bool>(std::ofstream(probe, std::ios::binary | std::ios::trunc));
    std::filesystem::remove(probe, ec);
    if (!writable) throw Error(dir_.string() + ": the output directory is not writable");
  }
  if (overwrite) return;
  for (const auto& name : files) {
    const auto file = dir_ / name;
    if (std::filesystem::exists(file, ec)) {
      throw UsageError(file.string() + " already exists; pass --overwrite to replace it or choose another --out");
    }
  }
}

std::ofstream OutputDir::open(const std::string& name) const {
  const auto file = dir_ / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(file.string() + ": cannot open for writing");
  return out;
}

}  // namespace twin
