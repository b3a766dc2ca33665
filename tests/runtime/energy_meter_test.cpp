// The measured-energy reader (engine/runtime/energy_meter.hpp; issue 44):
// RAPL's package domains summed across a counter wrap, sub-zones left out,
// an unreadable counter or a missing driver named rather than read as 0.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/runtime/energy_meter.hpp"

using namespace twin;
namespace fs = std::filesystem;

namespace {

void write_zone(const fs::path& zone, std::uint64_t energy_uj, std::uint64_t range_uj) {
  fs::create_directories(zone);
  std::ofstream(zone / "energy_uj") << energy_uj << "\n";
  std::ofstream(zone / "max_energy_range_uj") << range_uj << "\n";
}

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("twin_energy_meter_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("RAPL: package domains summed, a wrapped counter unwrapped, sub-zones not counted twice") {
  const fs::path root = fresh("rapl");
  write_zone(root / "intel-rapl:0", 1'000'000, 2'000'000);
  write_zone(root / "intel-rapl:0:0", 5'000'000, 9'000'000);  // core sub-zone: inside package 0
  write_zone(root / "intel-rapl:1", 10'000'000, 50'000'000);
  EnergyMeter meter = EnergyMeter::for_backend("cpu", {}, root.string());
  meter.start();
  write_zone(root / "intel-rapl:0", 500'000, 2'000'000);  // wrapped: 1.0 J to the top, then 0.5 J
  write_zone(root / "intel-rapl:0:0", 8'000'000, 9'000'000);
  write_zone(root / "intel-rapl:1", 13'000'000, 50'000'000);  // 3 J
  const MeasuredEnergy m = meter.stop(2.0);
  REQUIRE(m.known);
  CHECK(m.joules == Approx(4.5));
  CHECK(m.average_power_w == Approx(2.25));
  CHECK(m.source == "RAPL (2 package domain(s))");
  fs::remove_all(root);
}

TEST_CASE("RAPL: an unreadable or absent counter is not known, with the reason") {
  const fs::path root = fresh("unreadable");
  fs::create_directories(root / "intel-rapl:0");  // no energy_uj (as a non-root user sees a 0400 file)
  EnergyMeter meter = EnergyMeter::for_backend("cpu", {}, root.string());
  meter.start();
  const MeasuredEnergy m = meter.stop(1.0);
  CHECK_FALSE(m.known);
  CHECK_THAT(m.reason, Catch::Contains("intel-rapl:0/energy_uj is not readable"));
  fs::remove_all(root);

  const fs::path empty = fresh("empty");
  EnergyMeter none = EnergyMeter::for_backend("cpu", {}, empty.string());
  none.start();
  const MeasuredEnergy n = none.stop(1.0);
  CHECK_FALSE(n.known);
  CHECK_THAT(n.reason, Catch::Contains("no RAPL package domain"));
  fs::remove_all(empty);
}

TEST_CASE("NVML is opened at run time: without the driver the reading says so") {
  EnergyMeter meter = EnergyMeter::for_backend("cuda", {0});
  meter.start();
  const MeasuredEnergy m = meter.stop(1.0);
  if (m.known) {  // a machine with an NVIDIA driver
    CHECK(m.joules >= 0);
    CHECK_THAT(m.source, Catch::Contains("NVML"));
  } else {
    CHECK_FALSE(m.reason.empty());
  }
  const MeasuredEnergy other = EnergyMeter::for_backend("metal").stop(1.0);
  CHECK_FALSE(other.known);
  CHECK_THAT(other.reason, Catch::Contains("metal"));
}
