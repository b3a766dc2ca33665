// twinserve._core: the C++ half of `import twinserve` (docs/python.md).
// Every call is the command line's own: the Python side turns keyword
// arguments into the command's words, and parse_words (tools/twinserve/
// cli_app.hpp) parses and runs them with the same flag registry; a capture
// (tools/twinserve/capture.hpp) takes the result as values. The GIL is
// released while a command runs; a stop poll on the simulator's progress
// callback checks for Ctrl-C and ends the run with KeyboardInterrupt.
#include <CLI/CLI.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <iostream>
#include <sstream>
#include <limits>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "metrics/summary_json.hpp"
#include "python/python_policies.hpp"
#include "tools/twinserve/capture.hpp"
#include "tools/twinserve/cli_app.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "traces/trace_reader.hpp"

namespace py = pybind11;

namespace twin::python {
namespace {

// Thrown by the stop poll; caught where the GIL is held again.
struct Interrupted {};

// Ctrl-C while the GIL is released: the poll takes the GIL, asks Python
// whether a signal handler raised, and unwinds the run if so.
void stop_poll() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) {
    PyErr_Clear();
    throw Interrupted{};
  }
}

// Runs `words` as the command line would, the GIL released; maps the
// command's errors onto Python's: ValueError for usage (a bad flag, a bad
// value: the CLI's message, which names the flag), RuntimeError otherwise.
void run_words(const std::vector<std::string>& words) {
  CLI::App app{"twinserve"};
  app.require_subcommand(1);
  cli::install_commands(app);
  std::string usage, runtime;
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    try {
      cli::parse_words(app, words);
    } catch (const CLI::ParseError& e) {
      usage = e.what();
      if (usage.empty()) usage = e.get_name();
    } catch (const UsageError& e) {
      usage = e.what();
    } catch (const Interrupted&) {
      interrupted = true;
    } catch (const std::exception& e) {
      runtime = e.what();
    }
  }
  if (interrupted) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  if (!usage.empty()) throw py::value_error(usage);
  if (!runtime.empty()) throw std::runtime_error(runtime);
}

template <class T>
py::array_t<T> array_of(std::vector<T>& v) {
  return py::array_t<T>(static_cast<py::ssize_t>(v.size()), v.data());
}

double seconds_or_nan(Time t) { return t == kNoTime ? std::numeric_limits<double>::quiet_NaN() : to_seconds(t); }

// requests.csv's columns as arrays (docs/outputs.md): the same records,
// the same units; NaN where the CSV leaves a cell empty.
struct RequestColumns {
  std::vector<std::int64_t> id;
  std::vector<std::int32_t> replica, prompt_tokens, output_tokens, cached_prompt_tokens, preemptions;
  std::vector<std::int8_t> outcome;  // 0 finished, 1 aborted, 2 rejected
  std::vector<double> arrival_s, first_token_s, finish_s, scheduled_s, energy_j;
  std::vector<std::string> reason;
  void add(const RequestRecord& r) {
    energy_j.push_back(r.energy_uj < 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(r.energy_uj) * 1e-6);
    id.push_back(static_cast<std::int64_t>(r.id));
    replica.push_back(r.replica);
    outcome.push_back(r.outcome == Outcome::finished ? 0 : r.outcome == Outcome::aborted ? 1 : 2);
    arrival_s.push_back(to_seconds(r.arrival));
    first_token_s.push_back(seconds_or_nan(r.first_token));
    finish_s.push_back(seconds_or_nan(r.finish));
    scheduled_s.push_back(seconds_or_nan(r.first_scheduled));
    prompt_tokens.push_back(r.prompt_tokens);
    output_tokens.push_back(r.output_tokens);
    cached_prompt_tokens.push_back(r.cached_prompt_tokens);
    preemptions.push_back(r.preemptions);
    reason.push_back(r.reason);
  }
  py::dict take() {
    py::dict d;
    d["id"] = array_of(id);
    d["replica"] = array_of(replica);
    d["outcome_code"] = array_of(outcome);
    d["arrival_s"] = array_of(arrival_s);
    d["first_token_s"] = array_of(first_token_s);
    d["finish_s"] = array_of(finish_s);
    d["prompt_tokens"] = array_of(prompt_tokens);
    d["output_tokens"] = array_of(output_tokens);
    d["cached_prompt_tokens"] = array_of(cached_prompt_tokens);
    d["preemptions"] = array_of(preemptions);
    d["scheduled_s"] = array_of(scheduled_s);
    d["energy_j"] = array_of(energy_j);  // issue 44: its share of its steps' energy (NaN: not known)
    d["reason"] = py::cast(reason);
    return d;
  }
};

// steps.csv's columns, plus the step's energy (NaN: not known).
struct StepColumns {
  std::vector<std::int64_t> step_id, new_tokens, context_tokens;
  std::vector<std::int32_t> replica, batch_size, num_prefill_seqs, num_decode_seqs, kv_blocks_used, preempted, waiting;
  std::vector<double> start_s, duration_ms, energy_j;
  void add(const StepRecord& s) {
    step_id.push_back(static_cast<std::int64_t>(s.step_id));
    replica.push_back(s.replica);
    start_s.push_back(to_seconds(s.start));
    duration_ms.push_back(static_cast<double>(s.duration) / 1e6);
    batch_size.push_back(s.batch_size);
    num_prefill_seqs.push_back(s.num_prefill_seqs);
    num_decode_seqs.push_back(s.num_decode_seqs);
    new_tokens.push_back(s.new_tokens);
    context_tokens.push_back(s.context_tokens);
    kv_blocks_used.push_back(s.kv_blocks_used);
    preempted.push_back(s.preempted);
    waiting.push_back(s.waiting);
    energy_j.push_back(s.energy_uj < 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(s.energy_uj) * 1e-6);
  }
  py::dict take() {
    py::dict d;
    d["step_id"] = array_of(step_id);
    d["replica"] = array_of(replica);
    d["start_s"] = array_of(start_s);
    d["duration_ms"] = array_of(duration_ms);
    d["batch_size"] = array_of(batch_size);
    d["num_prefill_seqs"] = array_of(num_prefill_seqs);
    d["num_decode_seqs"] = array_of(num_decode_seqs);
    d["new_tokens"] = array_of(new_tokens);
    d["context_tokens"] = array_of(context_tokens);
    d["kv_blocks_used"] = array_of(kv_blocks_used);
    d["preempted"] = array_of(preempted);
    d["waiting"] = array_of(waiting);
    d["energy_j"] = array_of(energy_j);
    return d;
  }
};

// router / queue_order: the Python functions the "python" policies call
// (python_policies.hpp), or None.
py::dict simulate(const std::vector<std::string>& words, bool requests, bool steps, py::object router,
                  py::object queue_order) {
  const PolicyFunctions policies(std::move(router), std::move(queue_order));
  cli::SimulateCapture capture;
  RequestColumns request_columns;
  StepColumns step_columns;
  capture.prepare = [&](RunOutputs& outputs) {
    if (requests) outputs.on_request = [&](const RequestRecord& r) { request_columns.add(r); };
    if (steps) outputs.on_step = [&](const StepRecord& s) { step_columns.add(s); };
    outputs.progress = [](const SimProgress&) { stop_poll(); };
  };
  cli::simulate_capture() = &capture;
  struct Reset {
    ~Reset() { cli::simulate_capture() = nullptr; }
  } reset;
  run_words(words);
  if (!capture.done) throw std::runtime_error("simulate: the command ended without a result (an --explain option?)");
  py::dict out;
  out["summary_json"] = summary_to_json(capture.result.summary).dump(2);
  out["notes"] = py::cast(capture.notes);
  out["warnings"] = py::cast(capture.result.summary.warnings);
  out["requests"] = requests ? py::object(request_columns.take()) : py::object(py::none());
  out["steps"] = steps ? py::object(step_columns.take()) : py::object(py::none());
  return out;
}

std::string plan(const std::vector<std::string>& words) {
  cli::PlanCapture capture;
  cli::plan_capture() = &capture;
  struct Reset {
    ~Reset() { cli::plan_capture() = nullptr; }
  } reset;
  run_words(words);
  if (!capture.done) throw std::runtime_error("plan: the command ended without a result");
  return capture.json.dump();
}

// A trace read by the same reader and flags as every command.
py::dict read_trace(const std::vector<std::string>& words) {
  CLI::App app{"trace"};
  cli::TraceInputFlags flags;
  cli::add_trace_input_flags(app, flags, "trace", true);
  cli::add_trace_arrival_flags(app, flags);
  std::vector<std::int64_t> id, session;
  std::vector<std::int32_t> prompt, output, priority, hash_block_size;
  std::vector<double> arrival, cancel;
  std::vector<std::vector<std::uint64_t>> hash_ids;  // prefix-cache block names (docs/traces.md)
  bool any_hash = false;
  std::string usage, runtime;
  {
    py::gil_scoped_release release;
    try {
      std::vector<std::string> reversed(words.rbegin(), words.rend());
      app.parse(reversed);
      TraceReader reader(flags.path, cli::trace_read_options(flags));
      Request r;
      while ((flags.max_requests <= 0 || static_cast<std::int64_t>(id.size()) < flags.max_requests) && reader.next(r)) {
        id.push_back(static_cast<std::int64_t>(r.id));
        arrival.push_back(to_seconds(r.arrival));
        prompt.push_back(r.prompt_len);
        output.push_back(r.output_len);
        priority.push_back(r.priority);
        session.push_back(r.session_id);
        cancel.push_back(seconds_or_nan(r.cancel_time));
        hash_block_size.push_back(r.hash_block_size);
        hash_ids.push_back(r.hash_ids);
        any_hash = any_hash || !r.hash_ids.empty();
      }
    } catch (const CLI::ParseError& e) {
      usage = e.what();
    } catch (const UsageError& e) {
      usage = e.what();
    } catch (const std::exception& e) {
      runtime = e.what();
    }
  }
  if (!usage.empty()) throw py::value_error(usage);
  if (!runtime.empty()) throw std::runtime_error(runtime);
  py::dict d;
  d["id"] = array_of(id);
  d["arrival_s"] = array_of(arrival);
  d["prompt_len"] = array_of(prompt);
  d["output_len"] = array_of(output);
  d["priority"] = array_of(priority);
  d["session_id"] = array_of(session);
  d["cancel_s"] = array_of(cancel);
  if (any_hash) {
    d["hash_block_size"] = array_of(hash_block_size);
    d["hash_ids"] = py::cast(hash_ids);
  }
  return d;
}

// Runs any other command (trace generate, hw show --json, ...) and returns
// what it printed on stdout (its files are written as ever). std::cout is
// the process's: a command printing from another thread at the same time
// would mix in.
std::string run_command(const std::vector<std::string>& words) {
  std::ostringstream text;
  std::streambuf* const saved = std::cout.rdbuf(text.rdbuf());
  struct Restore {
    std::streambuf* saved;
    ~Restore() { std::cout.rdbuf(saved); }
  } restore{saved};
  run_words(words);
  return text.str();
}

}  // namespace
}  // namespace twin::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "twinserve's C++ core: the command line's commands, called with their own flags (docs/python.md)";
  twin::python::register_python_policies();
  m.def("simulate", &twin::python::simulate, py::arg("words"), py::arg("requests") = true, py::arg("steps") = true,
        py::arg("router") = py::none(), py::arg("queue_order") = py::none());
  m.def("plan", &twin::python::plan, py::arg("words"));
  m.def("read_trace", &twin::python::read_trace, py::arg("words"));
  m.def("run_command", &twin::python::run_command, py::arg("words"));
}
