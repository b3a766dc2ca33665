#include "python/python_policies.hpp"

#include <string>

#include "base/error.hpp"
#include "engine/core/policy.hpp"

namespace twin::python {
namespace {

// The functions of the run in progress: borrowed references, owned by
// PolicyFunctions while the run lasts (the policies hold these pointers
// without touching reference counts, which would need the GIL).
PyObject* g_router = nullptr;
PyObject* g_queue_order = nullptr;

double seconds(Time t) { return t == kNoTime ? -1.0 : to_seconds(t); }

py::dict request_dict(const Request& r) {
  py::dict d;
  d["id"] = r.id;
  d["arrival_s"] = seconds(r.arrival);
  d["prompt_len"] = r.prompt_len;
  d["output_len"] = r.output_len;
  d["priority"] = r.priority;
  d["session_id"] = r.session_id;
  return d;
}

// Calls fn under the GIL; a Python exception or a result of the wrong type
// becomes an Error carrying Python's message (raised as RuntimeError once
// the run has unwound), so nothing Python-owned crosses the released GIL.
template <class Call>
auto with_gil(const char* what, Call&& call) -> decltype(call()) {
  std::string failure;
  {
    py::gil_scoped_acquire gil;
    try {
      return call();
    } catch (const py::error_already_set& e) {
      failure = e.what();
    } catch (const py::cast_error& e) {
      failure = std::string("its result is not an int (") + e.what() + ")";
    }
  }
  throw Error(std::string(what) + ": " + failure);
}

class PythonRouter final : public RoutingPolicy {
 public:
  explicit PythonRouter(PyObject* fn) : fn_(fn) {}
  std::int32_t pick(const Request& request, const ReplicaLoads& loads) override {
    const std::int32_t n = loads.size();
    const auto pick = with_gil("the Python router", [&] {
      py::list replicas(static_cast<std::size_t>(n));
      for (std::int32_t i = 0; i < n; ++i) {
        py::dict d;
        d["outstanding"] = loads.outstanding(i);
        d["kv_usage"] = loads.kv_usage(i);
        d["waiting"] = loads.waiting(i);
        d["running"] = loads.running(i);
        replicas[static_cast<std::size_t>(i)] = std::move(d);
      }
      return py::handle(fn_)(request_dict(request), replicas).cast<std::int64_t>();
    });
    if (pick < 0 || pick >= n) {
      throw Error("the Python router returned " + std::to_string(pick) + " for request " + std::to_string(request.id) +
                  ": not a replica index in [0, " + std::to_string(n) + ")");
    }
    return static_cast<std::int32_t>(pick);
  }

 private:
  PyObject* fn_;
};

class PythonQueueOrder final : public QueueOrderPolicy {
 public:
  explicit PythonQueueOrder(PyObject* fn) : fn_(fn) {}
  std::int64_t key(const Request& request, std::int32_t num_output) const override {
    return with_gil("the Python queue order", [&] {
      py::dict d = request_dict(request);
      d["num_output"] = num_output;
      return py::handle(fn_)(d).cast<std::int64_t>();
    });
  }

 private:
  PyObject* fn_;
};

[[noreturn]] void no_function(const char* flag, const char* keyword) {
  throw UsageError(std::string(flag) + " python: pass the function as twinserve.simulate(..., " + keyword + "=fn)");
}

}  // namespace

void register_python_policies() {
  routing_policies().add(kPythonPolicy, "a Python function (twinserve.simulate(router=fn), docs/python.md)",
                         [](std::uint64_t) -> std::unique_ptr<RoutingPolicy> {
                           if (g_router == nullptr) no_function("--router", "router");
                           return std::make_unique<PythonRouter>(g_router);
                         });
  queue_orders().add(kPythonPolicy, "a Python key function (twinserve.simulate(queue_order=fn), docs/python.md)",
                     [](const SchedulerConfig&) -> std::unique_ptr<QueueOrderPolicy> {
                       if (g_queue_order == nullptr) no_function("--queue-order", "queue_order");
                       return std::make_unique<PythonQueueOrder>(g_queue_order);
                     });
}

PolicyFunctions::PolicyFunctions(py::object router, py::object queue_order)
    : router_(std::move(router)), queue_order_(std::move(queue_order)) {
  for (const py::object* fn : {&router_, &queue_order_}) {
    if (!fn->is_none() && !PyCallable_Check(fn->ptr())) throw py::type_error("a Python policy must be callable");
  }
  g_router = router_.is_none() ? nullptr : router_.ptr();
  g_queue_order = queue_order_.is_none() ? nullptr : queue_order_.ptr();
}

PolicyFunctions::~PolicyFunctions() {
  g_router = nullptr;
  g_queue_order = nullptr;
}

}  // namespace twin::python
