// Compressed traces: gzip and zstd by magic bytes, streamed, and errors that
// name the file without quoting its bytes.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "tests/traces/test_util.hpp"
#include "traces/byte_source.hpp"
#include "traces/trace_reader.hpp"

using namespace twin;
using namespace twin::test;

namespace {

std::string error_of(const std::string& path) {
  try {
    read_all(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

bool printable(const std::string& s) {
  for (char c : s)
    if (c < 0x20 || c >= 0x7f) return false;
  return true;
}

void check_same(const std::vector<Request>& a, const std::vector<Request>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].arrival == b[i].arrival);
    CHECK(a[i].prompt_len == b[i].prompt_len);
    CHECK(a[i].output_len == b[i].output_len);
  }
}

}  // namespace

TEST_CASE("gzip, zstd and multi-member gzip read as the plain file", "[traces][compression]") {
  const auto plain = read_all(fixture("azure2024.csv"));
  REQUIRE(plain.size() == 5);
  check_same(read_all(fixture("azure2024.csv.gz")), plain);
  check_same(read_all(fixture("azure2024.csv.zst")), plain);
  check_same(read_all(fixture("azure2024_members.csv.gz")), plain);
  CHECK(open_byte_source(fixture("azure2024.csv.gz"))->compression() == Compression::gzip);
  CHECK(open_byte_source(fixture("azure2024.csv.zst"))->compression() == Compression::zstd);
  CHECK(open_byte_source(fixture("azure2024.csv"))->compression() == Compression::none);

  // By magic, not by name.
  TempFile renamed(".csv");
  write_file(renamed.path, read_file(fixture("azure2024.csv.zst")));
  check_same(read_all(renamed.path), plain);
}

TEST_CASE("Corrupt, truncated or misnamed compressed files name the file, never print bytes", "[traces][compression]") {
  const std::string truncated = error_of(fixture("truncated.csv.gz"));
  CHECK_THAT(truncated, Catch::Contains("truncated.csv.gz: the gzip data ends early"));
  const std::string corrupt = error_of(fixture("corrupt.csv.gz"));
  CHECK_THAT(corrupt, Catch::Contains("corrupt.csv.gz: corrupt gzip data"));
  CHECK(printable(truncated));
  CHECK(printable(corrupt));

  std::string zst = read_file(fixture("azure2024.csv.zst"));
  TempFile bad_zst(".csv.zst");
  write_file(bad_zst.path, zst.substr(0, zst.size() / 2));
  const std::string cut = error_of(bad_zst.path);
  CHECK_THAT(cut, Catch::Contains(bad_zst.path + ": ") && Catch::Contains("zstd"));
  CHECK(printable(cut));
  for (std::size_t i = 6; i < zst.size(); ++i) zst[i] = static_cast<char>(zst[i] ^ 0x5a);
  write_file(bad_zst.path, zst);
  const std::string garbled = error_of(bad_zst.path);
  CHECK_THAT(garbled, Catch::Contains(bad_zst.path + ": ") && Catch::Contains("zstd"));
  CHECK(printable(garbled));

  TempFile plain_gz(".csv.gz");
  write_file(plain_gz.path, read_file(fixture("azure2024.csv")));
  CHECK_THAT(error_of(plain_gz.path), Catch::Contains(plain_gz.path + ": the name ends in .gz but the file is not gzip"));
  TempFile empty_zst(".zst");
  write_file(empty_zst.path, "");
  CHECK_THAT(error_of(empty_zst.path), Catch::Contains("not zstd data"));
}
