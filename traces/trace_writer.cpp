#include "traces/trace_writer.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "base/error.hpp"
#include "traces/text_parse.hpp"

namespace twin {

namespace {

template <class Vec>
void append_list(std::string& out, const Vec& values, char sep) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out.push_back(sep);
    append_int(out, values[i]);
  }
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TraceFormat output_format_for_path(const std::string& path) {
  if (ends_with(path, ".jsonl")) return TraceFormat::twin_jsonl;
  if (ends_with(path, ".csv")) return TraceFormat::twin_csv;
  throw UsageError("cannot tell the output format of '" + path +
                   "': the name must end in .jsonl or .csv");
}

TraceFormat parse_output_format(std::string_view name) {
  if (name == "jsonl") return TraceFormat::twin_jsonl;
  if (name == "csv") return TraceFormat::twin_csv;
  if (name == "mooncake") return TraceFormat::mooncake;
  if (name == "vidur") return TraceFormat::vidur;
  if (name == "azure") return TraceFormat::azure;
  throw UsageError("--to '" + excerpt(name, 40) + "': known: jsonl, csv, mooncake, vidur, azure");
}

bool is_writable_format(TraceFormat f) {
  return f == TraceFormat::twin_jsonl || f == TraceFormat::twin_csv || f == TraceFormat::mooncake ||
         f == TraceFormat::vidur || f == TraceFormat::azure;
}

const char* twin_csv_header() {
  return "id,arrival_s,prompt_len,output_len,priority,session_id,cancel_s,hash_block_size,hash_ids,"
         "prompt_tokens";
}

void append_twin_jsonl(std::string& out, const Request& r) {
  out += "{\"id\":";
  append_int(out, r.id);
  out += ",\"arrival_s\":";
  append_seconds_9(out, r.arrival);
  out += ",\"prompt_len\":";
  append_int(out, r.prompt_len);
  out += ",\"output_len\":";
  append_int(out, r.output_len);
  out += ",\"priority\":";
  append_int(out, r.priority);
  out += ",\"session_id\":";
  append_int(out, r.session_id);
  if (r.cancel_time != kNoTime) {
    out += ",\"cancel_s\":";
    append_seconds_9(out, r.cancel_time);
  }
  if (!r.hash_ids.empty()) {
    out += ",\"hash_block_size\":";
    append_int(out, r.hash_block_size);
    out += ",\"hash_ids\":[";
    append_list(out, r.hash_ids, ',');
    out += ']';
  }
  if (!r.prompt_tokens.empty()) {
    out += ",\"prompt_tokens\":[";
    append_list(out, r.prompt_tokens, ',');
    out += ']';
  }
  out += '}';
}

void append_twin_csv(std::string& out, const Request& r) {
  append_int(out, r.id);
  out += ',';
  append_seconds_9(out, r.arrival);
  out += ',';
  append_int(out, r.prompt_len);
  out += ',';
  append_int(out, r.output_len);
  out += ',';
  append_int(out, r.priority);
  out += ',';
  append_int(out, r.session_id);
  out += ',';
  if (r.cancel_time != kNoTime) append_seconds_9(out, r.cancel_time);
  out += ',';
  if (!r.hash_ids.empty()) append_int(out, r.hash_block_size);
  out += ',';
  append_list(out, r.hash_ids, ' ');
  out += ',';
  append_list(out, r.prompt_tokens, ' ');
}

TraceWriter::TraceWriter(const std::string& path, bool overwrite)
    : TraceWriter(path, output_format_for_path(path), overwrite) {}

TraceWriter::TraceWriter(const std::string& path, TraceFormat format, bool overwrite)
    : path_(path), format_(format) {
  if (!is_writable_format(format))
    throw UsageError("traces can be written as twin-jsonl, twin-csv, mooncake, vidur or azure, not " +
                     std::string(format_name(format)));
  if (!overwrite && std::filesystem::exists(path))
    throw UsageError("output '" + path + "' exists; pass --overwrite (or --force) to replace it");
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) throw Error("cannot create '" + path + "': " + std::strerror(errno));
  buffer_.reserve(1 << 20);
  const char* header = format_ == TraceFormat::twin_csv ? twin_csv_header()
                       : format_ == TraceFormat::vidur  ? vidur_csv_header()
                       : format_ == TraceFormat::azure  ? azure_csv_header()
                                                        : nullptr;
  if (header) {
    buffer_ += header;
    buffer_ += '\n';
  }
}

TraceWriter::~TraceWriter() {
  try {
    close();
  } catch (...) {
    // Destructors must not throw; callers who care call close() themselves.
  }
}

void TraceWriter::write(const Request& r) {
  if (!file_) throw Error("write to closed trace '" + path_ + "'");
  switch (format_) {
    case TraceFormat::twin_jsonl:
      append_twin_jsonl(buffer_, r);
      break;
    case TraceFormat::twin_csv:
      append_twin_csv(buffer_, r);
      break;
    case TraceFormat::mooncake:
      append_mooncake(buffer_, r);
      break;
    case TraceFormat::vidur:
      append_vidur(buffer_, r);
      break;
    default:
      append_azure(buffer_, r);
      break;
  }
  count_losses(r);
  buffer_ += '\n';
  ++rows_;
  if (buffer_.size() >= (1u << 20)) flush();
}

void TraceWriter::count_losses(const Request& r) {
  if (format_ == TraceFormat::twin_jsonl || format_ == TraceFormat::twin_csv) return;
  // Mooncake keeps hash ids, but its readers take them as 512-token blocks.
  const bool keeps_hash_ids = format_ == TraceFormat::mooncake;
  if (!r.hash_ids.empty() && !keeps_hash_ids) ++lost_hash_ids_;
  if (!r.hash_ids.empty() && keeps_hash_ids && r.hash_block_size != 512) ++lost_block_size_;
  if (r.session_id >= 0) ++lost_sessions_;
  if (r.priority != 0) ++lost_priorities_;
  if (r.cancel_time != kNoTime) ++lost_cancels_;
  if (!r.prompt_tokens.empty()) ++lost_prompt_tokens_;
}

std::string TraceWriter::losses() const {
  std::string out;
  auto add = [&out](const char* what, std::int64_t n) {
    if (n == 0) return;
    if (!out.empty()) out += ", ";
    out += what;
    out += " (" + std::to_string(n) + (n == 1 ? " request)" : " requests)");
  };
  add("hash ids", lost_hash_ids_);
  add("hash block sizes other than 512 (read back with --hash-block-size)", lost_block_size_);
  add("sessions", lost_sessions_);
  add("priorities", lost_priorities_);
  add("cancel times", lost_cancels_);
  add("prompt token ids", lost_prompt_tokens_);
  return out;
}

void TraceWriter::flush() {
  if (buffer_.empty()) return;
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
    throw Error("error writing '" + path_ + "': " + std::strerror(errno));
  buffer_.clear();
}

void TraceWriter::close() {
  if (!file_) return;
  std::FILE* f = file_;
  try {
    flush();
  } catch (...) {
    file_ = nullptr;
    std::fclose(f);
    throw;
  }
  file_ = nullptr;
  if (std::fclose(f) != 0) throw Error("error closing '" + path_ + "': " + std::strerror(errno));
}

}  // namespace twin
