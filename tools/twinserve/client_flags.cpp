#include "tools/twinserve/client_flags.hpp"

#include <CLI/CLI.hpp>

#include "base/error.hpp"
#include "tools/twinserve/flag_checks.hpp"

namespace twin::cli {

void add_client_flags(CLI::App& sub, ClientFlags& f) {
  sub.add_option("--max-concurrency", f.max_concurrency,
                 "At most N requests in flight (vLLM's --max-concurrency): a request goes out at the later of its "
                 "trace time and the instant one ends, and counts (TTFT) from then; with --request-rate inf a "
                 "closed loop of N clients")
      ->check(int_range(1, kMaxInt32));
  sub.add_option("--request-rate", f.request_rate,
                 "inf: every trace time is 0 (vLLM's spelling): all at once, or with --max-concurrency N each "
                 "client sends its next request the instant its last one ends; to re-time a trace at a rate, "
                 "use `trace convert --scale-rate` or `trace generate --rate`")
      ->check(CLI::IsMember({"inf"}));
  sub.add_flag("--sessions", f.sessions,
               "Closed-loop sessions: the rows of a session (session_id >= 0) are chat turns; turn k+1 goes out a "
               "think time after turn k's last token, its prompt turn k's prompt and output plus its new user "
               "tokens (docs/simulate.md, \"Clients\")");
  sub.add_option("--think-time-s", f.think_time_s,
                 "With --sessions: seconds from a turn's last token to the next turn (default: the trace's gap "
                 "between the two turns' times)")
      ->check(real_range(0, 9.0e9));
}

ClientOptions client_options(const ClientFlags& f) {
  if (f.think_time_s && !f.sessions) throw UsageError("--think-time-s needs --sessions");
  ClientOptions o;
  o.max_concurrency = f.max_concurrency;
  o.at_once = f.request_rate == "inf";
  o.sessions = f.sessions;
  if (f.think_time_s) o.think_time = think_time_from_seconds(*f.think_time_s, "--think-time-s");
  return o;
}

void echo_client_options(const ClientFlags& f, nlohmann::ordered_json& echo) {
  if (f.max_concurrency > 0) echo["max_concurrency"] = f.max_concurrency;
  if (f.request_rate == "inf") echo["request_rate"] = "inf";
  if (f.sessions) echo["sessions"] = true;
  if (f.think_time_s) echo["think_time_s"] = *f.think_time_s;
}

}  // namespace twin::cli
