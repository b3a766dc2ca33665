#pragma once
// Errors shared by every part. A UsageError is the user's mistake in what they
// asked for (unknown name, bad option value): the command line exits with 2.
// Any other Error is a runtime failure (bad file contents, model does not
// fit): exit 1. Messages name the file, line or key and what was expected.
#include <stdexcept>
#include <string>

namespace twin {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct UsageError : Error {
  using Error::Error;
};

}  // namespace twin
