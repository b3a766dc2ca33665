#pragma once
// cpp-httplib's Server (0.11) with the guards it lacks, so that no client
// can hold an HTTP thread or the server's memory:
// - a deadline for reading a whole request (head and body): its per-read
//   timeout restarts at every byte, so a client sending a byte a second
//   held a thread for ever, and as many such clients as threads blocked
//   every other client (slowloris);
// - an idle timeout between the requests of a kept-alive connection;
// - a cap on the request head (its reader grows a header line without
//   bound before checking its length).
// It serves each connection itself (process_and_close_socket, the hook the
// library's own TLS server overrides) over a Stream that enforces them; the
// request parsing and routing are the library's.
#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace twin {

struct ConnectionLimits {
  std::chrono::milliseconds request_read_timeout{30000};  // head and body of one request
  std::chrono::milliseconds keep_alive_timeout{5000};     // idle between two requests
  std::size_t max_head_bytes = std::size_t{64} << 10;     // request line and headers
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(ConnectionLimits limits) : limits_(limits) {}

  // For a handler: the connection closes once this response is written (a
  // body refused unread leaves bytes that are no next request).
  static void close_after_response();
  // For the pre-routing handler: the head has been read; what the request
  // reads from now on is its body.
  static void head_complete();

  // One connection's bytes, as a client would send them, through the
  // server's parsing and routing without a socket; returns what it wrote
  // back. For the fuzzer (tools/fuzz): handlers must not wait on a loop.
  std::string serve_bytes(const std::string& input, std::size_t max_output = std::size_t{1} << 20);

 private:
  bool process_and_close_socket(socket_t sock) override;

  ConnectionLimits limits_;
};

}  // namespace twin
