#pragma once
// Writes requests in twinserve's own formats, chosen by the file extension:
// .jsonl (one object per line) or .csv. Arrival and cancel times are seconds
// with exactly 9 decimals so nanoseconds round-trip; fields are written in a
// fixed order, so identical requests give identical bytes.
#include <cstdio>
#include <string>

#include "engine/core/request.hpp"
#include "traces/trace_format.hpp"

namespace twin {

// twin_jsonl for ".jsonl", twin_csv for ".csv"; UsageError otherwise.
TraceFormat output_format_for_path(const std::string& path);

class TraceWriter {
 public:
  // Creates (truncates) path. With overwrite false an existing file is an
  // error (UsageError naming it).
  explicit TraceWriter(const std::string& path, bool overwrite = true);
  TraceWriter(const std::string& path, TraceFormat format, bool overwrite);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void write(const Request& request);
  // Flushes and closes; throws Error on a write failure. Called by the
  // destructor too, which swallows errors: call it to see them.
  void close();
  std::int64_t rows() const { return rows_; }

 private:
  void flush();

  std::string path_;
  TraceFormat format_;
  std::FILE* file_ = nullptr;
  std::string buffer_;
  std::int64_t rows_ = 0;
};

// One request in each format, without the trailing newline (tests, tools).
void append_twin_jsonl(std::string& out, const Request& r);
void append_twin_csv(std::string& out, const Request& r);
const char* twin_csv_header();

}  // namespace twin
