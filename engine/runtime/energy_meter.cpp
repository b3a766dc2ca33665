#include "engine/runtime/energy_meter.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace twin {
namespace {

bool read_number(const std::filesystem::path& path, std::uint64_t& value) {
  std::ifstream in(path);
  return static_cast<bool>(in >> value);
}

class RaplCounter : public EnergyCounter {
 public:
  explicit RaplCounter(std::vector<std::filesystem::path> zones) : zones_(std::move(zones)) {
    for (const auto& z : zones_) {
      std::uint64_t range = 0;
      wrap_.push_back(read_number(z / "max_energy_range_uj", range) ? range : 0);
    }
  }
  bool read_uj(std::vector<std::uint64_t>& out, std::string& why) override {
    out.clear();
    for (const auto& z : zones_) {
      std::uint64_t v = 0;
      if (!read_number(z / "energy_uj", v)) {
        why = (z / "energy_uj").string() + " is not readable (root only since Linux 5.10: "
              "sudo chmod a+r it, or run as root)";
        return false;
      }
      out.push_back(v);
    }
    return true;
  }
  std::vector<std::uint64_t> wrap_uj() const override { return wrap_; }
  std::string name() const override { return "RAPL (" + std::to_string(zones_.size()) + " package domain(s))"; }

 private:
  std::vector<std::filesystem::path> zones_;
  std::vector<std::uint64_t> wrap_;
};

// NVML's C API, declared here (no header needed): the calls used and their
// documented signatures; return 0 is NVML_SUCCESS.
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlHandleByIndex = int (*)(unsigned int, void**);
using NvmlTotalEnergy = int (*)(void*, unsigned long long*);

class NvmlCounter : public EnergyCounter {
 public:
  NvmlCounter(void* lib, NvmlShutdown shutdown, NvmlTotalEnergy energy, std::vector<void*> devices)
      : lib_(lib), shutdown_(shutdown), energy_(energy), devices_(std::move(devices)) {}
  ~NvmlCounter() override {
    shutdown_();
    dlclose(lib_);
  }
  bool read_uj(std::vector<std::uint64_t>& out, std::string& why) override {
    out.clear();
    for (void* d : devices_) {
      unsigned long long mj = 0;
      if (const int rc = energy_(d, &mj); rc != 0) {
        why = "nvmlDeviceGetTotalEnergyConsumption failed (NVML error " + std::to_string(rc) +
              "; Volta or newer needed)";
        return false;
      }
      out.push_back(static_cast<std::uint64_t>(mj) * 1000);
    }
    return true;
  }
  std::vector<std::uint64_t> wrap_uj() const override { return std::vector<std::uint64_t>(devices_.size(), 0); }
  std::string name() const override { return "NVML (" + std::to_string(devices_.size()) + " device(s))"; }

 private:
  void* lib_;
  NvmlShutdown shutdown_;
  NvmlTotalEnergy energy_;
  std::vector<void*> devices_;
};

// A package domain's name: intel-rapl:N, not a sub-zone (intel-rapl:N:M).
bool is_rapl_package(const std::string& name) {
  constexpr std::string_view prefix = "intel-rapl:";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::unique_ptr<EnergyCounter> rapl_counter(const std::string& powercap_root, std::string& why) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> zones;
  for (const auto& e : fs::directory_iterator(powercap_root, ec)) {
    if (is_rapl_package(e.path().filename().string())) zones.push_back(e.path());
  }
  if (ec || zones.empty()) {
    why = "no RAPL package domain under " + powercap_root + " (not an Intel/AMD RAPL machine, or powercap absent)";
    return nullptr;
  }
  std::sort(zones.begin(), zones.end());
  return std::make_unique<RaplCounter>(std::move(zones));
}

std::unique_ptr<EnergyCounter> nvml_counter(const std::vector<int>& devices, std::string& why) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    why = "libnvidia-ml.so.1 not found (no NVIDIA driver on this machine)";
    return nullptr;
  }
  auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<NvmlShutdown>(dlsym(lib, "nvmlShutdown"));
  auto handle = reinterpret_cast<NvmlHandleByIndex>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto energy = reinterpret_cast<NvmlTotalEnergy>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
  if (!init || !shutdown || !handle || !energy) {
    why = "libnvidia-ml.so.1 lacks nvmlDeviceGetTotalEnergyConsumption (driver too old)";
    dlclose(lib);
    return nullptr;
  }
  if (const int rc = init(); rc != 0) {
    why = "nvmlInit failed (NVML error " + std::to_string(rc) + ")";
    dlclose(lib);
    return nullptr;
  }
  std::vector<void*> handles;
  for (const int d : devices) {
    void* h = nullptr;
    if (d < 0 || handle(static_cast<unsigned int>(d), &h) != 0) {
      why = "NVML has no device " + std::to_string(d);
      shutdown();
      dlclose(lib);
      return nullptr;
    }
    handles.push_back(h);
  }
  return std::make_unique<NvmlCounter>(lib, shutdown, energy, std::move(handles));
}

EnergyMeter EnergyMeter::for_backend(const std::string& backend, const std::vector<int>& cuda_devices,
                                     const std::string& powercap_root) {
  std::string why;
  if (backend == "cpu") {
    auto c = rapl_counter(powercap_root, why);
    return EnergyMeter(std::move(c), why);
  }
  if (backend == "cuda") {
    auto c = nvml_counter(cuda_devices, why);
    return EnergyMeter(std::move(c), why);
  }
  return EnergyMeter(nullptr, "backend " + backend + " has no energy counter twinserve reads");
}

EnergyMeter::EnergyMeter(std::unique_ptr<EnergyCounter> counter, std::string why_not)
    : counter_(std::move(counter)), why_not_(std::move(why_not)) {}

void EnergyMeter::start() {
  if (counter_ && !counter_->read_uj(start_, why_not_)) counter_.reset();
}

MeasuredEnergy EnergyMeter::stop(double wall_s) {
  MeasuredEnergy m;
  std::vector<std::uint64_t> end;
  if (!counter_ || !counter_->read_uj(end, why_not_)) {
    m.reason = why_not_.empty() ? "no energy counter read" : why_not_;
    return m;
  }
  const std::vector<std::uint64_t> wrap = counter_->wrap_uj();
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < end.size() && i < start_.size(); ++i) {
    // One wrap at most between the two reads (RAPL's range is minutes to
    // hours of package power).
    total += end[i] >= start_[i] ? end[i] - start_[i] : wrap[i] - start_[i] + end[i];
  }
  m.known = true;
  m.source = counter_->name();
  m.joules = static_cast<double>(total) * 1e-6;
  m.wall_s = wall_s;
  m.average_power_w = wall_s > 0 ? m.joules / wall_s : 0;
  return m;
}

}  // namespace twin
