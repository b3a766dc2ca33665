// What a run's folder gets: --steps none|sample:N|all and --compress gz|zst,
// the compressed files decompressing to the plain ones byte for byte.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "base/error.hpp"
#include "metrics/result_files.hpp"
#include "records_fixture.hpp"
#include "temp_dir.hpp"
#include "traces/line_reader.hpp"

using namespace twin;
using Catch::Matchers::Contains;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The file's bytes decompressed by the trace readers' decoders.
std::string decompressed(const std::filesystem::path& p) {
  auto source = open_byte_source(p.string());
  std::string out;
  char buffer[4096];
  while (const std::size_t got = source->read(buffer, sizeof buffer)) out.append(buffer, got);
  return out;
}

// Many steps over three replicas and the hand-made requests, repeated.
void write_run(ResultFiles& files) {
  for (int i = 0; i < 3000; ++i) {
    for (RequestRecord r : test::hand_requests()) {
      r.id += 10 * i;
      files.requests()->write(r);
    }
  }
  if (!files.steps()) return;
  for (std::uint64_t step = 0; step < 2000; ++step) {
    for (std::int32_t replica = 0; replica < 3; ++replica) {
      StepRecord s = test::hand_steps()[step % 2];
      s.step_id = step;
      s.replica = replica;
      files.steps()->write(s);
    }
  }
}

}  // namespace

TEST_CASE("step selections parse and refuse what they do not know") {
  CHECK(parse_step_selection("all", "--steps").every == 1);
  CHECK(parse_step_selection("none", "--steps").none());
  CHECK(parse_step_selection("sample:10", "--steps").every == 10);
  for (const char* bad : {"sample:0", "sample:", "sample:-3", "sample:1x", "some", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_step_selection(bad, "--steps"), UsageError);
  }
  CHECK_THROWS_WITH(parse_step_selection("every:2", "--steps"), Contains("--steps") && Contains("sample:N"));
  CHECK(parse_csv_compression("gz", "--compress") == CsvCompression::gzip);
  CHECK(parse_csv_compression("zst", "--compress") == CsvCompression::zstd);
  CHECK_THROWS_WITH(parse_csv_compression("bz2", "--compress"), Contains("--compress") && Contains("none, gz or zst"));
}

TEST_CASE("compressed CSVs decompress to the plain files byte for byte") {
  test::TempDir tmp;
  const OutputDir dir(tmp.path(), true);
  std::uint64_t plain_bytes = 0;
  {
    ResultFiles plain(dir, {}, {});
    write_run(plain);
    plain.close();
    plain_bytes = plain.bytes_written();
  }
  const std::string requests = slurp(tmp.path() / "requests.csv"), steps = slurp(tmp.path() / "steps.csv");
  CHECK(plain_bytes == requests.size() + steps.size());
  for (const CsvCompression c : {CsvCompression::gzip, CsvCompression::zstd}) {
    ResultFileOptions options;
    options.compression = c;
    ResultFiles files(dir, options, {});
    write_run(files);
    files.close();
    const auto names = csv_result_names(options);
    REQUIRE(names.size() == 2);
    INFO(names[0]);
    CHECK(decompressed(tmp.path() / names[0]) == requests);
    CHECK(decompressed(tmp.path() / names[1]) == steps);
    CHECK(files.bytes_written() == slurp(tmp.path() / names[0]).size() + slurp(tmp.path() / names[1]).size());
    CHECK(files.bytes_written() * 5 < plain_bytes);  // repetitive rows compress well
  }
}

TEST_CASE("steps sample:N keeps the steps whose id is a multiple of N, none writes no steps.csv") {
  test::TempDir tmp;
  const OutputDir dir(tmp.path(), true);
  ResultFileOptions options;
  options.steps = parse_step_selection("sample:7", "--steps");
  {
    ResultFiles files(dir, options, {});
    write_run(files);
    files.close();
  }
  std::istringstream in(slurp(tmp.path() / "steps.csv"));
  std::string line;
  std::getline(in, line);  // header
  int rows = 0;
  while (std::getline(in, line)) {
    const std::uint64_t id = std::stoull(line.substr(0, line.find(',')));
    CHECK(id % 7 == 0);
    ++rows;
  }
  CHECK(rows == 3 * ((2000 + 6) / 7));  // steps 0, 7, ..., 1995 of each of three replicas
  std::filesystem::remove(tmp.path() / "steps.csv");
  options.steps = parse_step_selection("none", "--steps");
  CHECK(csv_result_names(options) == std::vector<std::string>{"requests.csv"});
  ResultFiles none(dir, options, {});
  CHECK(none.steps() == nullptr);
  none.close();
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "steps.csv"));
}
