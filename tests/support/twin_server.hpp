#pragma once
// `twinserve serve` (the built binary, env TWIN_BIN) as a child process for
// tests that drive it over HTTP: its stdout and stderr go to files in `dir`;
// the port is the one it prints ("listening on http://127.0.0.1:PORT").
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace twin::test {

class TwinServer {
 public:
  TwinServer(const std::filesystem::path& dir, const std::vector<std::string>& flags) {
    const std::filesystem::path log = dir / "serve.stdout";
    const char* bin = std::getenv("TWIN_BIN");
    REQUIRE(bin != nullptr);  // ctest sets it; by hand: TWIN_BIN=build/tools/twinserve
    std::vector<std::string> args = {bin, "serve", "--port", "0", "--shutdown-timeout", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::posix_spawn_file_actions_addopen(&actions, 2, (dir / "serve.stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) == 0);
    ::posix_spawn_file_actions_destroy(&actions);
    const std::string mark = "listening on http://127.0.0.1:";
    for (int i = 0; i < 1200 && port_ == 0; ++i) {  // a readiness wait, bounded
      std::ifstream in(log);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (const auto at = text.find(mark); at != std::string::npos) port_ = std::atoi(text.c_str() + at + mark.size());
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(port_ > 0);
  }
  // SIGTERM: the server finishes and writes its result files; its exit code.
  int stop() {
    if (pid_ == 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~TwinServer() { stop(); }
  TwinServer(const TwinServer&) = delete;
  TwinServer& operator=(const TwinServer&) = delete;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = 0;
  int port_ = 0;
};

}  // namespace twin::test
