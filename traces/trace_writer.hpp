#pragma once
// Writes requests in twinserve's own formats, chosen by the file extension:
// .jsonl (one object per line) or .csv, or in a public format for other
// tools (mooncake, vidur, azure), which hold less: what each row could not
// carry is counted (losses()). Arrival and cancel times are seconds with
// exactly 9 decimals so nanoseconds round-trip; fields are written in a
// fixed order, so identical requests give identical bytes.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "engine/core/request.hpp"
#include "traces/trace_format.hpp"

namespace twin {

// twin_jsonl for ".jsonl", twin_csv for ".csv"; UsageError otherwise.
TraceFormat output_format_for_path(const std::string& path);
// `trace convert --to`: "jsonl", "csv", "mooncake", "vidur" or "azure";
// UsageError otherwise.
TraceFormat parse_output_format(std::string_view name);
// Whether TraceWriter writes the format.
bool is_writable_format(TraceFormat format);

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
  // What the format could not hold, e.g. "hash ids (12 requests), sessions
  // (40 requests)"; empty when nothing was lost.
  std::string losses() const;

 private:
  void flush();
  void count_losses(const Request& r);

  std::string path_;
  TraceFormat format_;
  std::FILE* file_ = nullptr;
  std::string buffer_;
  std::int64_t rows_ = 0;
  // Requests whose field the format dropped (foreign formats only).
  std::int64_t lost_hash_ids_ = 0, lost_block_size_ = 0, lost_sessions_ = 0, lost_priorities_ = 0,
               lost_cancels_ = 0, lost_prompt_tokens_ = 0;
};

// One request in each format, without the trailing newline (tests, tools).
void append_twin_jsonl(std::string& out, const Request& r);
void append_twin_csv(std::string& out, const Request& r);
const char* twin_csv_header();
void append_mooncake(std::string& out, const Request& r);
void append_vidur(std::string& out, const Request& r);
const char* vidur_csv_header();
void append_azure(std::string& out, const Request& r);
const char* azure_csv_header();

}  // namespace twin
