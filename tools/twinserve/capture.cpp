#include "tools/twinserve/capture.hpp"

namespace twin::cli {

SimulateCapture*& simulate_capture() {
  thread_local SimulateCapture* capture = nullptr;
  return capture;
}

PlanCapture*& plan_capture() {
  thread_local PlanCapture* capture = nullptr;
  return capture;
}

}  // namespace twin::cli
