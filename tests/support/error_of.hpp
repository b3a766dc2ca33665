#pragma once
// The message of the twin::Error a call throws, or "" when it throws none:
// tests assert on what an error says (file, key, flag) without a try block each.
#include <functional>
#include <string>

#include "base/error.hpp"

namespace twin::test {

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace twin::test
