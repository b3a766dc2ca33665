// The profiles of issue 41 (B300, GB200/GB300 NVL72, H20, MI300X/MI325X/
// MI355X): each loads, carries its datasheet figures and a vendor, and
// resolves from the name its driver reports; the FP4 peak and the vendor
// are optional, checked fields.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/embedded_file.hpp"

using namespace twin;

namespace {

nlohmann::json bundled_json(const std::string& name) {
  for (const auto& f : bundled_hardware_files())
    if (f.name == name) return nlohmann::json::parse(f.text);
  FAIL(name + " is not bundled");
  return {};
}

std::string parse_error(const nlohmann::json& j) {
  try {
    parse_hardware_json(j.dump(), "p.json", "p");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the 2026 GPUs load with their datasheet figures") {
  const HardwareDesc b300 = resolve_hardware("b300");
  CHECK(peak_flops(b300, Dtype::fp4) == Approx(13125e12));
  CHECK(b300.gpus_per_node == 8);
  const HardwareDesc gb200 = resolve_hardware("gb200-nvl72");
  CHECK(gb200.gpus_per_node == 72);  // one NVLink domain
  CHECK(gb200.interconnect == "nvswitch");
  CHECK(gb200.nvlink_bandwidth_gbps == 900);  // 1.8 TB/s per GPU, both directions
  CHECK(peak_flops(gb200, Dtype::fp4) == Approx(10000e12));
  const HardwareDesc gb300 = resolve_hardware("gb300-nvl72");
  CHECK(gb300.gpus_per_node == 72);
  CHECK(peak_flops(gb300, Dtype::fp4) == Approx(15000e12));
  const HardwareDesc h20 = resolve_hardware("h20");
  CHECK(peak_flops(h20, Dtype::bf16) == Approx(148e12));
  CHECK(h20.memory_bandwidth_gbps == 4000);
  CHECK(memory_bytes(h20) == 97871.0 * 1024 * 1024);
  CHECK_FALSE(supports(h20, Dtype::fp4));
  for (const char* amd : {"mi300x", "mi325x", "mi355x"}) {
    INFO(amd);
    const HardwareDesc hw = resolve_hardware(amd);
    CHECK(hw.vendor == "amd");
    CHECK(quant_hardware(hw).cuda == false);
    CHECK(hw.interconnect == "xgmi_mesh");  // nvlink_bandwidth_gbps is one xGMI link's
  }
  CHECK(peak_flops(resolve_hardware("mi300x"), Dtype::fp8) == Approx(2614.9e12));
  CHECK_FALSE(supports(resolve_hardware("mi300x"), Dtype::fp4));
  CHECK(peak_flops(resolve_hardware("mi355x"), Dtype::fp4) == Approx(10066.3e12));
  CHECK(resolve_hardware("b200").vendor == "nvidia");  // the default
  CHECK(peak_flops(resolve_hardware("b200"), Dtype::fp4) == Approx(9000e12));
  CHECK_THROWS_WITH(peak_flops(resolve_hardware("h100-80gb"), Dtype::fp4), Catch::Contains("no fp4"));
}

TEST_CASE("the new profiles resolve from the names their drivers report") {
  CHECK(hardware_for_device("cuda", "NVIDIA B300 SXM6 AC") == "b300");
  CHECK(hardware_for_device("cuda", "NVIDIA GB200") == "gb200-nvl72");
  CHECK(hardware_for_device("cuda", "NVIDIA GB300") == "gb300-nvl72");
  CHECK(hardware_for_device("cuda", "NVIDIA H20") == "h20");
  CHECK(hardware_for_device("cuda", "NVIDIA H200") == "h200");  // not h20: whole words
  CHECK(hardware_for_device("cuda", "NVIDIA B200") == "b200");
  CHECK(hardware_for_device("cuda", "AMD Instinct MI300X") == "mi300x");
  CHECK(hardware_for_device("cuda", "AMD Instinct MI300X VF") == "mi300x");
  CHECK(hardware_for_device("cuda", "AMD Instinct MI325X") == "mi325x");
  CHECK(hardware_for_device("cuda", "AMD Instinct MI355X") == "mi355x");
}

TEST_CASE("the fp4 peak and the vendor are optional and checked, naming file and key") {
  auto j = bundled_json("b300");
  j["peak_tflops"]["fp4"] = -1;
  std::string msg = parse_error(j);
  CHECK(msg.find("p.json") != std::string::npos);
  CHECK(msg.find("peak_tflops.fp4") != std::string::npos);
  j = bundled_json("b300");
  j["sources"].erase("peak_tflops.fp4");
  msg = parse_error(j);
  CHECK(msg.find("sources.peak_tflops.fp4") != std::string::npos);
  j = bundled_json("mi300x");
  j["vendor"] = "intel";
  msg = parse_error(j);
  CHECK(msg.find("p.json") != std::string::npos);
  CHECK(msg.find("vendor") != std::string::npos);
  j = bundled_json("mi300x");
  j["interconnect"] = "infinity_fabric";
  CHECK(parse_error(j).find("xgmi_mesh") != std::string::npos);
  j = bundled_json("h20");
  j["peak_tflops"]["fp6"] = 1;
  CHECK(parse_error(j).find("peak_tflops.fp6") != std::string::npos);
  // Older files have neither: they load, NVIDIA without fp4.
  j = bundled_json("b300");
  j.erase("vendor");
  j["peak_tflops"].erase("fp4");
  j["sources"].erase("peak_tflops.fp4");
  const HardwareDesc old = parse_hardware_json(j.dump(), "p.json", "p");
  CHECK(old.vendor == "nvidia");
  CHECK_FALSE(supports(old, Dtype::fp4));
}
