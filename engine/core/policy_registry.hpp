#pragma once
// Name -> factory for one kind of policy (policy.hpp). Names are listed in
// registration order, so help texts and error messages list them as
// policy_list.hpp does. Lookups are made when a scheduler or router is
// built, never per step.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.hpp"

namespace twin {

template <class Policy, class... Args>
class PolicyRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Policy>(Args...)>;

  // `kind` names the registry in messages ("queue order", "router policy").
  explicit PolicyRegistry(std::string kind) : kind_(std::move(kind)) {}

  // Throws Error when the name is taken: two policies of one name would
  // make a configuration mean two things.
  void add(std::string name, std::string help, Factory factory) {
    if (find(name) != nullptr) throw Error(kind_ + " '" + name + "' is registered twice");
    entries_.push_back(Entry{std::move(name), std::move(help), std::move(factory)});
  }
  // Removes a run-time registration (the Python module's); false if absent.
  bool remove(std::string_view name) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->name == name) {
        entries_.erase(it);
        return true;
      }
    }
    return false;
  }
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  // Throws UsageError listing the known names.
  void check(std::string_view name) const { (void)entry(name); }
  std::unique_ptr<Policy> make(std::string_view name, Args... args) const {
    return entry(name).factory(std::forward<Args>(args)...);
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }
  const std::string& help(std::string_view name) const { return entry(name).help; }
  // "a, b, c": for help texts and messages.
  std::string joined_names() const {
    std::string out;
    for (const auto& e : entries_) out += (out.empty() ? "" : ", ") + e.name;
    return out;
  }
  const std::string& kind() const { return kind_; }

 private:
  struct Entry {
    std::string name;
    std::string help;
    Factory factory;
  };
  const Entry* find(std::string_view name) const {
    for (const auto& e : entries_) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }
  const Entry& entry(std::string_view name) const {
    if (const Entry* e = find(name)) return *e;
    throw UsageError("unknown " + kind_ + " '" + excerpt(name) + "': known names are " + joined_names());
  }

  std::string kind_;
  std::vector<Entry> entries_;
};

}  // namespace twin
