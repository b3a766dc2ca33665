#pragma once
// Whether the client of a non-streamed request is still there. cpp-httplib
// 0.11 gives a handler no socket and finds a closed peer only when a write
// fails, so a whole (non-streamed) response would keep its request running
// to the end however long ago its client gave up. A ClientWatch finds the
// request's connection among the process's sockets by its two ports (the
// request carries them) and asks the kernel whether the peer has closed it.
#include <string>

namespace twin {

class ClientWatch {
 public:
  // local_port: the server's; remote_addr / remote_port: the client's (as
  // httplib::Request has them).
  ClientWatch(int local_port, std::string remote_addr, int remote_port);

  // True once the client has closed or reset the connection. False while it
  // is open, when data waits on it (a pipelined request), and when the
  // connection cannot be told apart (not found, or two sockets match).
  bool gone();

 private:
  int find_socket() const;

  int local_port_, remote_port_;
  std::string remote_addr_;
  int fd_ = -1;  // found on the first call; open while the handler runs
  bool searched_ = false;
};

}  // namespace twin
