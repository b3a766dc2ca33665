// `twinserve bench` against a stand-in OpenAI server (tests/tools/
// fake_openai_server.py, Python's standard library, started here on a free
// port): streamed tokens become the client's records, the requests carry the
// trace's token ids and lengths, a 503 is a rejection with the server's
// reason, chunks of several tokens keep ITL out, and validate --measured
// reads the result back; end to end against `twinserve serve --simulate`.
// A server that is not there is an error naming the URL. Nothing here is
// timed.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/twin_server.hpp"
#include "tools/twinserve/sse_stream.hpp"

extern char** environ;

namespace fs = std::filesystem;
using twin::test::run_twinserve;
using twin::test::TwinServer;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("twin_bench_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

bool have_python() { return std::system("python3 -c 'import http.server' >/dev/null 2>&1") == 0; }

// The fake server as a child process; killed when the test ends. With
// `metrics_ttft_s` it serves /metrics claiming that TTFT for every request.
class FakeServer {
 public:
  explicit FakeServer(const fs::path& dir, const std::string& metrics_ttft_s = "") : log_(dir / "requests.log") {
    const fs::path port_file = dir / "port";
    const std::string script = std::string(TWIN_SOURCE_DIR) + "/tests/tools/fake_openai_server.py";
    std::vector<std::string> args = {"python3", script, port_file.string(), log_.string()};
    if (!metrics_ttft_s.empty()) args.push_back(metrics_ttft_s);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(::posix_spawnp(&pid_, "python3", nullptr, nullptr, argv.data(), environ) == 0);
    // Ready when it has written its port (a readiness wait, bounded so a
    // broken server fails the test instead of hanging it).
    for (int i = 0; i < 600 && !fs::exists(port_file); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(fs::exists(port_file));
    std::ifstream(port_file) >> port_;
    REQUIRE(port_ > 0);
  }
  ~FakeServer() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

 private:
  fs::path log_;
  pid_t pid_ = 0;
  int port_ = 0;
};

// Six requests; output 7 is refused by the server, output 9 streamed three
// tokens per chunk.
std::string write_trace(const fs::path& dir) {
  const fs::path path = dir / "t.jsonl";
  std::ofstream out(path);
  const int prompts[] = {12, 30, 7, 20, 16, 5};
  const int outputs[] = {4, 1, 7, 9, 6, 3};
  for (int i = 0; i < 6; ++i) {
    out << "{\"id\":" << 100 + i << ",\"arrival_s\":" << 0.01 * i << ",\"prompt_len\":" << prompts[i]
        << ",\"output_len\":" << outputs[i] << "}\n";
  }
  return path.string();
}

std::vector<std::vector<std::string>> csv_rows(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST_CASE("SSE parser: events split anywhere, CRLF, comments and other fields") {
  std::vector<std::string> events;
  twin::cli::SseParser parser([&](const std::string& d) { events.push_back(d); });
  const std::string stream = "data: {\"a\":1}\r\n\r\n: ping\n\nevent: x\ndata: one\ndata: two\n\ndata:[DONE]\n\n";
  for (char c : stream) parser.feed(std::string_view(&c, 1));
  parser.finish();
  CHECK(events == std::vector<std::string>{"{\"a\":1}", "one\ntwo", "[DONE]"});
  twin::cli::SseParser small([](const std::string&) {}, 8);
  CHECK_THROWS_WITH(small.feed("data: 123456789"), Catch::Contains("longer than 8 bytes"));
}

TEST_CASE("bench replays a trace against an OpenAI-compatible server and writes the client's view") {
  if (!have_python()) TWIN_SKIP("python3 not found: the stand-in server cannot start (tools/install-deps installs it)");
  const fs::path dir = fresh_dir("fake");
  const std::string trace = write_trace(dir);
  FakeServer server(dir);
  const fs::path out = dir / "out";
  auto r = run_twinserve("bench --trace " + trace + " --base-url " + server.url() + " --quiet --out " + out.string(), true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);

  // What the server got: the model it listed, token ids of the trace's
  // lengths, max_tokens = the output length, ignore_eos, streaming.
  const auto bodies = server.requests();
  REQUIRE(bodies.size() == 6);
  std::map<int, int> prompt_of_output;
  for (const auto& b : bodies) {
    CHECK(b["path"] == "/v1/completions");
    const auto& body = b["body"];
    CHECK(body["model"] == "tiny");
    CHECK(body["stream"] == true);
    CHECK(body["ignore_eos"] == true);
    CHECK(body["stream_options"]["include_usage"] == true);
    REQUIRE(body["prompt"].is_array());
    for (const auto& t : body["prompt"]) CHECK(t.is_number_integer());
    prompt_of_output[body["max_tokens"].get<int>()] = static_cast<int>(body["prompt"].size());
  }
  CHECK(prompt_of_output == std::map<int, int>{{4, 12}, {1, 30}, {7, 7}, {9, 20}, {6, 16}, {3, 5}});

  // requests.csv: one row each; the 503 a rejection with the server's reason.
  const auto rows = csv_rows(out / "requests.csv");
  REQUIRE(rows.size() == 7);
  int finished = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    if (row[0] == "102") {
      CHECK(row[2] == "rejected");
      CHECK(rows[i].back().find("HTTP 503: queue full") != std::string::npos);
    } else {
      CHECK(row[2] == "finished");
      ++finished;
    }
  }
  CHECK(finished == 5);
  std::ifstream summary_in(out / "summary.json");
  const auto summary = nlohmann::json::parse(summary_in);
  CHECK(summary["completed"] == 5);
  CHECK(summary["rejected"] == 1);
  CHECK(summary["total_output_tokens"] == 4 + 1 + 9 + 6 + 3);
  CHECK(summary["total_input_tokens"] == 12 + 30 + 20 + 16 + 5);
  // ITL gaps of the one-token-per-chunk requests: 3 + 0 + 5 + 2.
  CHECK(summary["itl_ms"]["count"] == 10);
  // A server with no record of its own and no /metrics: not compared, and said so.
  CHECK(summary["server_ttft"]["source"].is_null());
  CHECK(summary["server_ttft"]["note"].get<std::string>().find("not compared") != std::string::npos);
  CHECK_FALSE(summary.contains("warnings"));

  // vllm_result.json: vLLM's summary keys and the --save-detailed lists, in trace order.
  std::ifstream vllm_in(out / "vllm_result.json");
  const auto vllm = nlohmann::json::parse(vllm_in);
  CHECK(vllm["completed"] == 5);
  CHECK(vllm["failed"] == 1);
  CHECK(vllm["output_lens"] == nlohmann::json::array({4, 1, 0, 9, 6, 3}));
  CHECK(vllm["input_lens"] == nlohmann::json::array({12, 30, 7, 20, 16, 5}));
  CHECK(vllm["itls"][3].size() == 2);  // three chunks of three tokens
  CHECK(vllm["errors"][2].get<std::string>().find("queue full") != std::string::npos);
  CHECK(vllm["start_times"].size() == 6);

  // validate --measured reads both files back against the simulator.
  for (const char* file : {"vllm_result.json", "requests.csv"}) {
    const fs::path val = dir / (std::string("val_") + file);
    r = run_twinserve("validate --measured " + (out / file).string() + " --trace " + trace +
                          " --model tiny --hw cpu --out " + val.string(),
                      true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    std::ifstream report_in(val / "report.json");
    const auto report = nlohmann::json::parse(report_in);
    CHECK(report["measured_completed"] == 5);
    CHECK(report["arrivals"] == "send_times");
    if (std::string(file) == "vllm_result.json") CHECK(report["itl_gaps_left_out"] == 1);
  }

  // Chat completions need text prompts.
  r = run_twinserve("bench --trace " + trace + " --base-url " + server.url() +
                        " --endpoint /v1/chat/completions --quiet --out " + (dir / "chat").string(),
                    true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--prompt-format text") != std::string::npos);
  r = run_twinserve("bench --trace " + trace + " --base-url " + server.url() +
                        " --endpoint /v1/chat/completions --prompt-format text --max-concurrency 2 --quiet --out " +
                        (dir / "chat").string(),
                    true);
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(server.requests().back()["body"]["messages"][0]["role"] == "user");
  // The role delta sent before the tokens is not a token: one chunk per
  // token still gives one gap fewer than tokens.
  std::ifstream chat_in(dir / "chat" / "vllm_result.json");
  const auto chat = nlohmann::json::parse(chat_in);
  CHECK(chat["output_lens"] == nlohmann::json::array({4, 1, 0, 9, 6, 3}));
  for (const std::size_t i : {0, 1, 4, 5}) CHECK(chat["itls"][i].size() + 1 == chat["output_lens"][i].get<std::size_t>());
}

TEST_CASE("bench sets its TTFT against a server's /metrics histogram and warns when they disagree") {
  if (!have_python()) TWIN_SKIP("python3 not found: the stand-in server cannot start (tools/install-deps installs it)");
  const fs::path dir = fresh_dir("metrics");
  const std::string trace = write_trace(dir);
  // The server claims 600 ms for every first token; it sends them at once.
  FakeServer server(dir, "0.6");
  const fs::path out = dir / "out";
  const auto r = run_twinserve("bench --trace " + trace + " --base-url " + server.url() + " --quiet --out " + out.string(),
                               true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("warning: client TTFT median") != std::string::npos);
  std::ifstream summary_in(out / "summary.json");
  const auto summary = nlohmann::json::parse(summary_in);
  const auto& check = summary["server_ttft"];
  CHECK(check["source"] == "/metrics histogram");
  CHECK(check["requests"] == 5);  // the completed ones; the 503 is not in the histogram either
  CHECK(check["server_bucket_ms"] == nlohmann::json::array({500.0, 750.0}));
  CHECK(check["server_p50_ms"].get<double>() > 500.0);
  CHECK(check["server_p50_ms"].get<double>() <= 750.0);
  CHECK(check["agrees"] == false);
  CHECK(check["note"].get<std::string>().find("counted") == std::string::npos);  // 5 counted, 5 completed
  REQUIRE(summary.contains("warnings"));
  CHECK(summary["warnings"][0].get<std::string>().find("(500, 750] ms") != std::string::npos);
}

TEST_CASE("bench names the URL it cannot reach") {
  const fs::path dir = fresh_dir("down");
  const std::string trace = write_trace(dir);
  // Port 1 (tcpmux) is not served on a test machine: the connection is refused.
  const auto r = run_twinserve("bench --trace " + trace + " --base-url http://127.0.0.1:1 --quiet --out " +
                                   (dir / "out").string(),
                               true);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("cannot reach http://127.0.0.1:1/v1/models") != std::string::npos);
  const auto bad = run_twinserve("bench --trace " + trace + " --base-url ftp://x --out " + (dir / "o2").string(), true);
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find("expected http://HOST") != std::string::npos);
}

TEST_CASE("end to end: bench against twinserve serve --simulate, then validate --measured on what bench saw") {
  const fs::path dir = fresh_dir("serve");
  const std::string trace = (dir / "t.jsonl").string();
  REQUIRE(run_twinserve("trace generate --requests 24 --rate 40 --prompt uniform:8:48 --output uniform:2:16 --seed 9 " +
                        trace).exit_code == 0);
  TwinServer server(dir, {"--simulate", "--model", "tiny", "--hw", "cpu", "--out", (dir / "server").string()});
  const fs::path out = dir / "bench";
  auto r = run_twinserve("bench --trace " + trace + " --base-url " + server.url() + " --quiet --out " + out.string(), true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(server.stop() == 0);

  std::ifstream summary_in(out / "summary.json");
  const auto summary = nlohmann::json::parse(summary_in);
  CHECK(summary["completed"] == 24);
  CHECK(summary["config"]["model"] == "tiny");  // the first of the server's /v1/models
  // One token per chunk: every gap is an ITL sample (output tokens - 1 per request).
  std::ifstream vllm_in(out / "vllm_result.json");
  const auto vllm = nlohmann::json::parse(vllm_in);
  std::int64_t gaps = 0;
  for (std::size_t i = 0; i < vllm["output_lens"].size(); ++i) {
    CHECK(vllm["itls"][i].size() + 1 == vllm["output_lens"][i].get<std::size_t>());
    gaps += vllm["output_lens"][i].get<std::int64_t>() - 1;
  }
  CHECK(summary["itl_ms"]["count"] == gaps);
  // The server's records count the same tokens the client saw.
  const auto server_rows = csv_rows(dir / "server" / "requests.csv");
  REQUIRE(server_rows.size() == 25);
  std::int64_t server_tokens = 0;
  for (std::size_t i = 1; i < server_rows.size(); ++i) server_tokens += std::stoll(server_rows[i][7]);
  CHECK(server_tokens == summary["total_output_tokens"].get<std::int64_t>());

  // The simulator's prediction of the same deployment against the client's view.
  r = run_twinserve("validate --measured " + (out / "vllm_result.json").string() + " --trace " + trace +
                        " --model tiny --hw cpu --out " + (dir / "val").string(),
                    true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  std::ifstream report_in(dir / "val" / "report.json");
  const auto report = nlohmann::json::parse(report_in);
  CHECK(report["measured_completed"] == 24);
  CHECK(report["predicted_completed"] == 24);
  CHECK(report["itl_gaps_left_out"] == 0);
  CHECK(report["prompt_mismatches"] == 0);
  CHECK(report["ttft_ms"]["measured"]["p50"].is_number());
  CHECK(report["ttft_ms"]["predicted"]["p50"].is_number());
}
