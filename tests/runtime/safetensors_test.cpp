// The safetensors reader/writer, and weights that do not match the config.
#include <catch2/catch.hpp>

#include "tests/support/error_of.hpp"

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

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

TEST_CASE("safetensors: overlapping tensors, a name given twice and a FIFO are refused, never waited on") {
  const std::string dir = temp_dir("st_hand");
  // Two tensors sharing bytes 8..16 (before: accepted, each read the other's data).
  const std::string overlap = dir + "/overlap.safetensors";
  write_with_header(overlap,
                    R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                    24);
  CHECK(error_of([&] { SafetensorsFile f(overlap); }) ==
        overlap + ": tensors 'a' and 'b' overlap in the data section");
  // Adjacent ranges and empty tensors are no overlap.
  const std::string adjacent = dir + "/adjacent.safetensors";
  write_with_header(adjacent,
                    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],)"
                    R"("data_offsets":[4,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                    16);
  CHECK(SafetensorsFile(adjacent).tensors().size() == 3);
  // One name twice in the header: the guarded JSON parser refuses it.
  const std::string twice = dir + "/twice.safetensors";
  write_with_header(twice,
                    R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    8);
  CHECK_THAT(error_of([&] { SafetensorsFile f(twice); }), Catch::Contains("key 'w': given twice"));
  // A FIFO (before: the open waited for a writer forever) and a directory.
  const std::string fifo = dir + "/fifo.safetensors";
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(error_of([&] { SafetensorsFile f(fifo); }), Catch::Contains(fifo + ": not a regular file"));
  CHECK_THAT(error_of([&] { SafetensorsFile f(dir); }), Catch::Contains("not a regular file"));
}

TEST_CASE("weights: a tensor in two shards and a non-finite weight are refused, naming file, tensor and element") {
  const ModelConfig config = tiny_config();
  SECTION("one tensor in two files") {
    const WeightMap weights = random_weights(config, 1);
    const std::string dir = write_checkpoint(temp_dir("w_two_files"), config, weights);
    const std::vector<float> norm(static_cast<std::size_t>(config.hidden_size), 1.0f);
    const std::vector<SafetensorsWriteTensor> again = {
        {"model.norm.weight", "F32", {config.hidden_size}, std::as_bytes(std::span<const float>(norm))}};
    write_safetensors(dir + "/zz-extra.safetensors", again);
    const std::string e = error_of([&] { make_runner(config, dir); });
    CHECK_THAT(e, Catch::Contains("tensor 'model.norm.weight' is in two files"));
    CHECK_THAT(e, Catch::Contains("zz-extra.safetensors"));
  }
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    INFO(bad);
    WeightMap weights = random_weights(config, 1);
    auto& down = weights.at("model.layers.1.mlp.down_proj.weight");
    down.at(static_cast<std::size_t>(3 * config.intermediate_size + 5)) = bad;  // row 3, column 5
    const std::string dir = write_checkpoint(temp_dir("w_nonfinite"), config, weights);
    const std::string e = error_of([&] { make_runner(config, dir); });
    CHECK_THAT(e, Catch::Contains("tensor 'model.layers.1.mlp.down_proj.weight' holds"));
    CHECK_THAT(e, Catch::Contains(std::isnan(bad) ? "NaN at [3, 5]" : "an infinity at [3, 5]"));
  }
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
