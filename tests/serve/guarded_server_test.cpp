// The HTTP server's guards against clients (serve/guarded_server.hpp): a
// deadline for a whole request, so slow clients cannot hold every thread
// (slowloris); a cap on the request head; bodies through the routes'
// limit. Nothing here asserts a duration: the slow clients would need
// thousands of seconds to finish, and the test checks that a normal request
// was answered while they were still sending.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "serve/guarded_server.hpp"

namespace twin {
namespace {

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

// Whether the server closed fd (end of file or a reset), without waiting.
bool closed_by_server(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

// A slowloris client: a request head of 100,000 bytes, one byte every 20 ms
// (2,000 s in all, each byte well inside the library's 5 s per-read
// timeout), until the server closes the connection.
struct SlowClient {
  std::atomic<bool> started{false}, cut{false}, finished{false};
  std::thread thread;

  void run(int port, const std::atomic<bool>& stop) {
    thread = std::thread([this, port, &stop] {
      const int fd = connect_to(port);
      const std::string head = "GET /ping HTTP/1.1\r\nX-Slow: " + std::string(100000, 'a') + "\r\n\r\n";
      for (std::size_t i = 0; i < head.size() && !stop; ++i) {
        if (::send(fd, &head[i], 1, MSG_NOSIGNAL) != 1 || closed_by_server(fd)) {
          cut = true;
          break;
        }
        started = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the client's pace, not a measurement
      }
      finished = !cut && !stop;
      ::close(fd);
    });
  }
};

TEST_CASE("guarded server: as many slow clients as threads do not block a normal request") {
  ConnectionLimits limits;
  limits.request_read_timeout = std::chrono::milliseconds(500);
  GuardedServer server(limits);
  constexpr int kThreads = 16;  // the case: 16 slow clients against 16 HTTP threads
  server.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  server.Get("/ping", [](const httplib::Request&, httplib::Response& res) { res.set_content("pong", "text/plain"); });
  const int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { server.listen_after_bind(); });

  std::atomic<bool> stop{false};
  std::vector<SlowClient> slow(kThreads);
  for (SlowClient& c : slow) c.run(port, stop);
  for (SlowClient& c : slow) {
    while (!c.started && !c.cut) std::this_thread::yield();  // each holds a connection before the normal one
  }
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(600, 0);  // generous: without the deadline it would wait for the slow clients (2,000 s)
  const auto res = client.Get("/ping");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->body == "pong");
  int finished = 0;
  for (SlowClient& c : slow) finished += c.finished ? 1 : 0;
  CHECK(finished == 0);  // answered while every slow client was still sending (or had been cut)

  stop = true;
  for (SlowClient& c : slow) c.thread.join();
  server.stop();
  serving.join();
}

TEST_CASE("guarded server: a request head past the cap is refused, not grown without bound") {
  ConnectionLimits limits;
  limits.max_head_bytes = 4096;
  GuardedServer server(limits);
  server.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    GuardedServer::head_complete();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.Get("/ping", [](const httplib::Request&, httplib::Response& res) { res.set_content("pong", "text/plain"); });
  const std::string ok = server.serve_bytes("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(ok.rfind("HTTP/1.1 200", 0) == 0);
  // One header line of 1 MB with no end: the library would keep growing it.
  const std::string long_line = server.serve_bytes("GET /ping HTTP/1.1\r\nX: " + std::string(1 << 20, 'a'));
  CHECK(long_line.find("200") == std::string::npos);
  std::string many = "GET /ping HTTP/1.1\r\n";
  for (int i = 0; i < 1000; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  CHECK(server.serve_bytes(many + "\r\n").rfind("HTTP/1.1 400", 0) == 0);
  // Two kept-alive requests on one connection are both answered.
  const std::string two = server.serve_bytes("GET /ping HTTP/1.1\r\n\r\nGET /ping HTTP/1.1\r\n\r\n");
  CHECK(two.find("pong") != two.rfind("pong"));
}

}  // namespace
}  // namespace twin
