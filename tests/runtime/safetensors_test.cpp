// The safetensors reader/writer, and weights that do not match the config.
#include <catch2/catch.hpp>

#include "tests/support/error_of.hpp"

#include <cstring>
#include <fstream>

#include "base/error.hpp"
#include "engine/runtime/safetensors.hpp"
#include "tests/runtime/test_support.hpp"

namespace twin::test {
namespace {

std::span<const std::byte> bytes_of(const std::vector<float>& v) {
  return std::as_bytes(std::span<const float>(v));
}

}  // namespace

TEST_CASE("safetensors write/read round trip keeps dtype, shape and bytes") {
  const std::string path = temp_dir("st") + "/roundtrip.safetensors";
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<std::uint16_t> b = {0x3f80, 0x4000, 0xc040};  // bf16 1, 2, -3
  const std::vector<SafetensorsWriteTensor> tensors = {
      {"a.weight", "F32", {2, 3}, bytes_of(a)},
      {"b.bias", "BF16", {3}, std::as_bytes(std::span<const std::uint16_t>(b))}};
  write_safetensors(path, tensors);
  const SafetensorsFile file(path);
  REQUIRE(file.tensors().size() == 2);
  const SafetensorsTensor* ta = file.find("a.weight");
  REQUIRE(ta);
  CHECK(ta->dtype == "F32");
  CHECK(ta->shape == std::vector<std::int64_t>{2, 3});
  REQUIRE(ta->bytes == 24);
  CHECK(std::memcmp(ta->data, a.data(), 24) == 0);
  const SafetensorsTensor* tb = file.find("b.bias");
  REQUIRE(tb);
  CHECK(tb->dtype == "BF16");
  CHECK(tb->shape == std::vector<std::int64_t>{3});
  CHECK(std::memcmp(tb->data, b.data(), 6) == 0);
  CHECK(file.find("missing") == nullptr);
}

TEST_CASE("safetensors rejects broken files naming the problem") {
  const std::string dir = temp_dir("st_bad");
  CHECK(error_of([&] { SafetensorsFile f(dir + "/nope.safetensors"); }).find("cannot open") != std::string::npos);
  {
    std::ofstream(dir + "/short.safetensors") << "abc";
    CHECK(error_of([&] { SafetensorsFile f(dir + "/short.safetensors"); }).find("not a safetensors") != std::string::npos);
  }
  {  // header claims more bytes than the file has
    std::ofstream out(dir + "/long.safetensors", std::ios::binary);
    const unsigned char len[8] = {0xff, 0xff, 0, 0, 0, 0, 0, 0};
    out.write(reinterpret_cast<const char*>(len), 8);
    out << "{}";
  }
  CHECK(error_of([&] { SafetensorsFile f(dir + "/long.safetensors"); }).find("header length") != std::string::npos);
  {  // data_offsets disagree with the shape
    const std::string header = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})";
    std::ofstream out(dir + "/shape.safetensors", std::ios::binary);
    std::uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(12, '\0');
  }
  const std::string e = error_of([&] { SafetensorsFile f(dir + "/shape.safetensors"); });
  CHECK(e.find("'w'") != std::string::npos);
  CHECK(e.find("[2, 2]") != std::string::npos);
  const std::vector<float> v = {1, 2, 3};
  const std::vector<SafetensorsWriteTensor> wrong = {{"x", "F32", {2, 2}, bytes_of(v)}};
  CHECK(error_of([&] { write_safetensors(dir + "/w.safetensors", wrong); }).find("'x'") != std::string::npos);
}

namespace {

// Whether the process still maps `path` (file-backed mappings are listed with
// their path in /proc/self/maps).
bool mapped(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(path) != std::string::npos) return true;
  }
  return false;
}

void write_with_header(const std::string& path, const std::string& header, std::size_t data_bytes) {
  std::ofstream out(path, std::ios::binary);
  std::uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
}

}  // namespace

TEST_CASE("a safetensors file refused after mapping is unmapped (twin_fuzz found mappings piling up)") {
  const std::string dir = temp_dir("st_unmap");
  const std::string path = dir + "/bad_header.safetensors";
  write_with_header(path, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 12);
  CHECK_FALSE(error_of([&] { SafetensorsFile f(path); }).empty());
  CHECK_FALSE(mapped(path));
  const std::string good = dir + "/good.safetensors";
  write_with_header(good, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", 12);
  {
    const SafetensorsFile f(good);
    CHECK(mapped(good));
  }
  CHECK_FALSE(mapped(good));
}

TEST_CASE("a shape whose byte count overflows 64 bits is refused, not wrapped to an empty tensor") {
  const std::string path = temp_dir("st_wrap") + "/wrap.safetensors";
  // 2^62 x 4 F32 elements: 2^66 bytes, which wraps to 0 and would match [0, 0].
  write_with_header(path, R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", 0);
  const std::string e = error_of([&] { SafetensorsFile f(path); });
  CHECK(e.find("'w'") != std::string::npos);
  CHECK(e.find("do not hold shape") != std::string::npos);
}

TEST_CASE("weights that do not match the config name the tensor and both shapes") {
  const ModelConfig config = tiny_config();
  WeightMap weights = random_weights(config, 1);

  SECTION("missing tensor") {
    weights.erase("model.layers.1.mlp.up_proj.weight");
    const std::string dir = write_checkpoint(temp_dir("w_missing"), config, weights);
    const std::string e = error_of([&] { make_runner(config, dir); });
    CHECK(e.find("model.layers.1.mlp.up_proj.weight") != std::string::npos);
    CHECK(e.find("missing") != std::string::npos);
  }
  SECTION("wrong shape") {
    ModelConfig wider = config;
    wider.intermediate_size = 96;  // the checkpoint has 128
    const std::string dir = write_checkpoint(temp_dir("w_shape"), config, weights);
    const std::string e = error_of([&] { make_runner(wider, dir); });
    CHECK(e.find("model.layers.0.mlp.gate_proj.weight") != std::string::npos);
    CHECK(e.find("[128, 64]") != std::string::npos);
    CHECK(e.find("[96, 64]") != std::string::npos);
  }
  SECTION("unsupported dtype") {
    const std::string dir = temp_dir("w_dtype");
    const std::vector<std::int32_t> ints(64 * 256, 0);
    const std::vector<SafetensorsWriteTensor> t = {
        {"model.embed_tokens.weight", "I32", {256, 64}, std::as_bytes(std::span<const std::int32_t>(ints))}};
    write_safetensors(dir + "/model.safetensors", t);
    const std::string e = error_of([&] { make_runner(config, dir); });
    CHECK(e.find("model.embed_tokens.weight") != std::string::npos);
    CHECK(e.find("I32") != std::string::npos);
  }
  SECTION("no checkpoint in the folder") {
    CHECK(error_of([&] { make_runner(config, temp_dir("w_empty")); }).find("no *.safetensors") != std::string::npos);
  }
}

}  // namespace twin::test
