#pragma once
// Measured energy of an engine run (issue 44; docs/energy.md, "Measured
// energy"): the device's own cumulative counter read before and after, so
// `run` and `validate` can put measured joules beside the prediction.
//   cpu:  RAPL, /sys/class/powercap/intel-rapl:N/energy_uj of every package
//         domain (not their sub-zones, which the package already counts),
//         with its wrap at max_energy_range_uj;
//   cuda: NVML's nvmlDeviceGetTotalEnergyConsumption (mJ since the driver
//         loaded) of each device, libnvidia-ml.so.1 opened at run time so the
//         binary has no link dependency on it.
// Where no counter can be read the reading says why (never a 0). Counters
// cover the whole package / board, not only this process.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "metrics/energy.hpp"

namespace twin {

class EnergyCounter {  // one cumulative counter source
 public:
  virtual ~EnergyCounter() = default;
  // Cumulative microjoules of every domain, or false with `why`.
  virtual bool read_uj(std::vector<std::uint64_t>& out, std::string& why) = 0;
  // The value after which each domain's counter wraps to 0 (0: never).
  virtual std::vector<std::uint64_t> wrap_uj() const = 0;
  virtual std::string name() const = 0;
};

// RAPL under `powercap_root` (a test passes a folder of its own).
std::unique_ptr<EnergyCounter> rapl_counter(const std::string& powercap_root, std::string& why);
// NVML for the CUDA devices `devices` (library loaded at run time).
std::unique_ptr<EnergyCounter> nvml_counter(const std::vector<int>& devices, std::string& why);

class EnergyMeter {
 public:
  // "cpu" reads RAPL, "cuda" NVML; any other backend: not known.
  static EnergyMeter for_backend(const std::string& backend, const std::vector<int>& cuda_devices = {0},
                                 const std::string& powercap_root = "/sys/class/powercap");
  explicit EnergyMeter(std::unique_ptr<EnergyCounter> counter, std::string why_not = "");
  void start();
  // Joules since start(); `wall_s` is the run's wall time (average power).
  MeasuredEnergy stop(double wall_s);

 private:
  std::unique_ptr<EnergyCounter> counter_;
  std::string why_not_;
  std::vector<std::uint64_t> start_;
};

}  // namespace twin
