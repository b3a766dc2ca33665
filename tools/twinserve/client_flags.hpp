#pragma once
// How a trace's requests are sent (traces/clients.hpp): --max-concurrency,
// --request-rate inf, --sessions and --think-time-s, vLLM's spellings where
// vllm bench serve has the knob.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "traces/clients.hpp"

namespace CLI {
class App;
}

namespace twin::cli {

struct ClientFlags {
  std::int32_t max_concurrency = 0;
  std::string request_rate;  // only "inf"
  bool sessions = false;
  std::optional<double> think_time_s;
};
void add_client_flags(CLI::App& sub, ClientFlags& flags);
// All but --max-concurrency (sweep takes a list of those: an axis).
void add_client_mode_flags(CLI::App& sub, ClientFlags& flags);
// UsageError naming the flag for a rate other than inf or a think time
// without sessions.
ClientOptions client_options(const ClientFlags& flags);
// The keys the config echo gets for the options that are set (none when open loop).
void echo_client_options(const ClientFlags& flags, nlohmann::ordered_json& echo);

}  // namespace twin::cli
