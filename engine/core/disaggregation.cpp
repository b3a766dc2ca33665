#include "engine/core/disaggregation.hpp"

#include <utility>

#include "base/error.hpp"

namespace twin {
namespace {

constexpr std::pair<const char*, ReplicaRole> kRoles[] = {
    {"mixed", ReplicaRole::mixed}, {"prefill", ReplicaRole::prefill}, {"decode", ReplicaRole::decode}};
constexpr std::pair<const char*, DisaggMode> kModes[] = {
    {"never", DisaggMode::never}, {"always", DisaggMode::always}, {"conditional", DisaggMode::conditional}};

template <class T, std::size_t N>
T lookup(const std::pair<const char*, T> (&table)[N], std::string_view name, const char* what) {
  std::string known;
  for (const auto& [n, v] : table) {
    if (name == n) return v;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  throw UsageError("unknown " + std::string(what) + " '" + excerpt(name) + "': known ones are " + known);
}

template <class T, std::size_t N>
std::string_view name_of(const std::pair<const char*, T> (&table)[N], T value) {
  for (const auto& [n, v] : table) {
    if (v == value) return n;
  }
  return "unknown";
}

template <class T, std::size_t N>
std::vector<std::string> names_of(const std::pair<const char*, T> (&table)[N]) {
  std::vector<std::string> out;
  for (const auto& [n, v] : table) out.emplace_back(n);
  return out;
}

}  // namespace

std::vector<std::string> replica_role_names() { return names_of(kRoles); }
ReplicaRole replica_role(std::string_view name) { return lookup(kRoles, name, "replica role"); }
std::string_view replica_role_name(ReplicaRole role) { return name_of(kRoles, role); }
std::vector<std::string> disagg_mode_names() { return names_of(kModes); }
DisaggMode disagg_mode(std::string_view name) { return lookup(kModes, name, "disaggregation mode"); }
std::string_view disagg_mode_name(DisaggMode mode) { return name_of(kModes, mode); }

}  // namespace twin
