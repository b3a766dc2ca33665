#include "tools/twinserve/client_flags.hpp"

#include <CLI/CLI.hpp>

#include "base/error.hpp"
#include "tools/twinserve/flag_registry.hpp"

namespace twin::cli {

void add_client_flags(CLI::App& sub, ClientFlags& f) {
  add_flag(sub, FlagId::max_concurrency, f.max_concurrency);
  add_client_mode_flags(sub, f);
}

void add_client_mode_flags(CLI::App& sub, ClientFlags& f) {
  add_flag(sub, FlagId::request_rate, f.request_rate);
  add_switch(sub, FlagId::sessions, f.sessions);
  add_flag(sub, FlagId::think_time_s, f.think_time_s);
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
