#pragma once
// Errors shared by every part. A UsageError is the user's mistake in what they
// asked for (unknown name, bad option value): the command line exits with 2.
// Any other Error is a runtime failure (bad file contents, model does not
// fit): exit 1. Messages name the file, line or key and what was expected.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace twin {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct UsageError : Error {
  using Error::Error;
};

// At most `max_chars` of user input for an error message, then how much was
// left out: an error quoting a megabyte-long value is itself unreadable.
inline std::string excerpt(std::string_view text, std::size_t max_chars = 200) {
  if (text.size() <= max_chars) return std::string(text);
  return std::string(text.substr(0, max_chars)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace twin
