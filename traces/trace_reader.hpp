#pragma once
// Streaming trace reader: one Request at a time, memory flat whatever the file
// size. Arrival times of foreign formats are rebased so the first request
// arrives at 0; twinserve's own formats keep their times as written. Request
// ids are 0..N-1 in file order (rows skipped do not take an id) unless the
// format carries ids (twin-jsonl, twin-csv). Files may be gzip or zstd
// compressed (byte_source.hpp). Rows with 0 prompt tokens are bad rows.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "engine/core/request.hpp"
#include "traces/arrival_process.hpp"
#include "traces/trace_format.hpp"

namespace twin {

enum class BadRowPolicy { error, skip };
// "error" or "skip"; UsageError otherwise.
BadRowPolicy parse_bad_row_policy(std::string_view name);

struct TraceReadOptions {
  TraceFormat format = TraceFormat::auto_detect;
  BadRowPolicy on_bad_row = BadRowPolicy::error;
  bool keep_failed = false;             // BurstGPT rows with 0 response tokens (kept with output_len 0)
  std::int32_t hash_block_size = 0;     // tokens per hash id; 0: the format's (Mooncake 512, Bailian 16)
  double backwards_tolerance_s = 1.0;   // later rows may arrive this much earlier; clamped, counted
  // Arrival times for formats without them (vidur-lengths, sharegpt), which
  // need a rate; a rate given for a format with its own times is an error.
  ArrivalOptions arrivals;
};

struct TraceReadReport {
  std::int64_t rows = 0;            // requests returned
  std::int64_t skipped_bad = 0;     // malformed rows skipped (on_bad_row = skip)
  std::int64_t skipped_failed = 0;  // BurstGPT failed requests skipped
  std::int64_t reordered = 0;       // rows slightly out of order, arrival clamped to the previous one
  std::string first_bad_row;        // "file:line: problem" of the first skipped bad row
};

class TraceReader {
 public:
  // Opens the file and reads the header (CSV) or peeks the first record
  // (JSONL). Throws twin::Error if the file is missing or of no known format.
  explicit TraceReader(const std::string& path, const TraceReadOptions& options = {});
  ~TraceReader();
  TraceReader(TraceReader&&) noexcept;
  TraceReader& operator=(TraceReader&&) noexcept;

  // Fills out with the next request (reusing its vectors' capacity); false at
  // end of file. A bad row throws twin::Error "file:line: problem" unless the
  // policy is skip. A file that ends before its first request (empty, a
  // header only, every row skipped) throws twin::Error saying so.
  bool next(Request& out);

  const TraceReadReport& report() const;
  TraceFormat format() const;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace twin
