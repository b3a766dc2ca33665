#include "traces/trace_reader.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"
#include "traces/arrival_process.hpp"
#include "traces/conversation.hpp"
#include "traces/json_elements.hpp"
#include "traces/json_row.hpp"
#include "traces/line_reader.hpp"
#include "traces/text_parse.hpp"

namespace twin {

BadRowPolicy parse_bad_row_policy(std::string_view name) {
  if (name == "error") return BadRowPolicy::error;
  if (name == "skip") return BadRowPolicy::skip;
  throw UsageError("unknown bad-row policy '" + std::string(name) + "' (known: error, skip)");
}

namespace {

enum class Column : std::uint8_t {
  ignore, datetime, seconds, id, prompt_len, output_len, priority, session_id, session_text, cancel_s,
  hash_block_size, hash_ids, prompt_tokens,
};

struct ColumnName {
  std::string_view name;  // lower case
  Column column;
};

std::vector<ColumnName> column_names_for(TraceFormat format) {
  switch (format) {
    case TraceFormat::azure:
      return {{"timestamp", Column::datetime}, {"contexttokens", Column::prompt_len},
              {"generatedtokens", Column::output_len}};
    case TraceFormat::burstgpt:
      return {{"timestamp", Column::seconds}, {"request tokens", Column::prompt_len},
              {"response tokens", Column::output_len}, {"session id", Column::session_text}};
    case TraceFormat::vidur:
      return {{"arrived_at", Column::seconds}, {"num_prefill_tokens", Column::prompt_len},
              {"num_decode_tokens", Column::output_len}};
    case TraceFormat::vidur_lengths:
      return {{"num_prefill_tokens", Column::prompt_len}, {"num_decode_tokens", Column::output_len}};
    case TraceFormat::splitwise:
      return {{"arrival_timestamp", Column::seconds}, {"prompt_size", Column::prompt_len},
              {"token_size", Column::output_len}};
    case TraceFormat::twin_csv:
      return {{"id", Column::id},
              {"arrival_s", Column::seconds},
              {"prompt_len", Column::prompt_len},
              {"output_len", Column::output_len},
              {"priority", Column::priority},
              {"session_id", Column::session_id},
              {"cancel_s", Column::cancel_s},
              {"hash_block_size", Column::hash_block_size},
              {"hash_ids", Column::hash_ids},
              {"prompt_tokens", Column::prompt_tokens}};
    default:
      return {};
  }
}

std::string lower_trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '"')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '"')) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string quoted(std::string_view text) {
  std::string out(1, '\'');
  out += printable_excerpt(text, 40);
  out.push_back('\'');
  return out;
}

// A session named by text (BurstGPT's Session ID): the number itself, or a
// stable 63-bit hash of the text (FNV-1a), so one name is one session.
std::int64_t session_from_text(std::string_view text) {
  std::int64_t id = 0;
  if (parse_int64(text, id)) return id;
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return static_cast<std::int64_t>(h & 0x7fffffffffffffffull);
}

// Space-separated integers (twin-csv list columns). Empty on success, else
// what is wrong (the caller names the column).
template <class T, class ParseFn>
std::string parse_list(std::string_view text, std::vector<T>& out, ParseFn parse_one, const char* expected) {
  out.clear();
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] == ' ') {
      ++pos;
      continue;
    }
    std::size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    if (out.size() >= kMaxRowListElements)
      return "holds more than " + std::to_string(kMaxRowListElements) + " elements";
    T value;
    if (!parse_one(text.substr(pos, end - pos), value)) return expected;
    out.push_back(value);
    pos = end;
  }
  return {};
}

enum class RowResult { ok, bad, failed };

}  // namespace

struct TraceReader::Impl {
  std::string path;
  TraceReadOptions options;
  std::unique_ptr<LineReader> lines;  // line formats
  TraceFormat format = TraceFormat::auto_detect;
  TraceReadReport report;

  std::vector<Column> columns;             // CSV: kind of each header column
  std::vector<std::string> header_names;   // CSV: as written, for messages
  JsonRowParser json;
  bool pending = false;                    // JSON: first line already read
  std::string pending_line;

  bool rebase = true;
  bool have_base = false;
  Time base = 0;
  bool have_last = false;
  Time last_arrival = 0;
  Time tolerance_ns = 0;
  RequestId next_id = 0;
  std::int32_t block_size = 0;
  std::unordered_map<std::int64_t, std::int64_t> session_root;  // Bailian chat id -> first chat id
  // Ids seen so far (twin formats), as disjoint runs first -> last: ids
  // written 0..N-1 take one entry.
  std::map<std::int64_t, std::int64_t> seen_ids;
  std::string error;

  // Formats without arrival times (vidur-lengths, sharegpt).
  std::optional<ArrivalProcess> arrivals;
  // sharegpt: conversations, each split into turns.
  std::unique_ptr<JsonElements> conversations;
  ConversationParser conversation_parser;
  std::vector<ConversationTurn> turns;
  std::size_t next_turn = 0;
  std::int64_t next_session = 0;
  std::int64_t current_session = -1;

  Impl(const std::string& p, const TraceReadOptions& o)
      : path(p), options(o), lines(std::make_unique<LineReader>(p)) {
    if (!(options.backwards_tolerance_s >= 0) || !std::isfinite(options.backwards_tolerance_s))
      throw UsageError("backwards tolerance must be a finite number >= 0 seconds");
    if (options.hash_block_size < 0) throw UsageError("hash block size must be >= 0");
    tolerance_ns = static_cast<Time>(std::llround(options.backwards_tolerance_s * 1e9));

    // A JSON array is ShareGPT's: detected before any line is read, as its
    // files are often one line of hundreds of megabytes.
    const bool json_array = lines->peek_first_nonblank() == '[';
    const bool conversations_file =
        options.format == TraceFormat::sharegpt || (options.format == TraceFormat::auto_detect && json_array);
    std::string_view first;
    bool have_first = false;
    if (!conversations_file) {
      while (lines->next(first)) {
        if (first.find_first_not_of(" \t") != std::string_view::npos) {
          have_first = true;
          break;
        }
      }
    }
    if (have_first && first.substr(0, 3) == "\xEF\xBB\xBF") first.remove_prefix(3);
    const TraceFormat detected =
        json_array ? TraceFormat::sharegpt : have_first ? detect_format(first) : TraceFormat::auto_detect;
    format = options.format == TraceFormat::auto_detect ? detected : options.format;
    if (format == TraceFormat::auto_detect) {
      if (!have_first) throw Error(path + ": empty file, cannot detect the trace format");
      throw Error(path + ":" + std::to_string(lines->line_number()) + ": unrecognised trace format (first line " +
                  quoted(first) + "); formats are recognised by these columns or keys: " + format_signatures() +
                  "; or name one with --format");
    }
    rebase = format != TraceFormat::twin_jsonl && format != TraceFormat::twin_csv;
    block_size = options.hash_block_size;
    if (block_size == 0) block_size = format == TraceFormat::bailian ? 16 : 512;
    start_arrivals();
    if (format == TraceFormat::sharegpt) {
      // Conversations may span lines: read objects, not lines.
      lines.reset();
      conversations = std::make_unique<JsonElements>(path);
      return;
    }
    if (!have_first) return;
    if (is_json_format(format)) {
      pending = true;
      pending_line.assign(first);
    } else {
      read_header(first);
    }
  }

  // Traces without arrival times take them from a rate; traces with their
  // own refuse one, so a rate is never silently ignored.
  void start_arrivals() {
    const bool given = options.arrivals.rate > 0;
    if (is_length_only(format)) {
      if (!given)
        throw Error(path + ": a " + std::string(format_name(format)) +
                    " trace has no arrival times: give a rate with --rate R (requests/s, Poisson; --arrival-seed S) to "
                    "simulate, plan or trace stats|convert (convert also takes --arrivals gamma|constant), e.g. "
                    "twinserve trace convert " + path + " OUT.jsonl --rate 2");
      arrivals.emplace(options.arrivals);
    } else if (given) {
      throw UsageError("--rate gives arrival times to traces without them (vidur-lengths, sharegpt); " + path +
                       " is " + std::string(format_name(format)) + ", which has its own");
    }
  }

  void read_header(std::string_view header) {
    const auto known = column_names_for(format);
    std::size_t pos = 0;
    for (;;) {
      std::size_t comma = header.find(',', pos);
      std::string_view name = header.substr(pos, comma == std::string_view::npos ? header.npos : comma - pos);
      const std::string key = lower_trimmed(name);
      Column kind = Column::ignore;
      for (const auto& k : known)
        if (k.name == key) kind = k.column;
      if (kind != Column::ignore && std::find(columns.begin(), columns.end(), kind) != columns.end())
        throw Error(path + ":" + std::to_string(lines->line_number()) + ": column " + quoted(name) +
                    " appears twice in the header");
      columns.push_back(kind);
      header_names.push_back(printable_excerpt(name, 60));
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    const Column time_col = format == TraceFormat::azure ? Column::datetime : Column::seconds;  // if any
    for (const auto& k : known) {
      const bool required = k.column == time_col || k.column == Column::prompt_len ||
                            k.column == Column::output_len || k.column == Column::id;
      if (required && std::find(columns.begin(), columns.end(), k.column) == columns.end())
        throw Error(path + ":" + std::to_string(lines->line_number()) + ": the " +
                    std::string(format_name(format)) + " header lacks column '" + std::string(k.name) +
                    "' (header " + quoted(header) + ")");
    }
  }

  bool bad(std::string message) {
    error = std::move(message);
    return false;
  }

  static void reset(Request& r) {
    r.id = 0;
    r.arrival = 0;
    r.prompt_len = 0;
    r.output_len = 0;
    r.prompt_tokens.clear();
    r.hash_ids.clear();
    r.hash_block_size = 0;
    r.priority = 0;
    r.session_id = -1;
    r.cancel_time = kNoTime;
  }

  bool csv_row(std::string_view line, Request& out, Time& raw_time) {
    std::size_t pos = 0;
    std::size_t col = 0;
    for (;;) {
      const std::size_t comma = line.find(',', pos);
      const std::string_view field =
          line.substr(pos, comma == std::string_view::npos ? line.npos : comma - pos);
      if (col < columns.size() && columns[col] != Column::ignore &&
          !csv_field(columns[col], col, field, out, raw_time))
        return false;
      ++col;
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    if (col != columns.size())
      return bad("expected " + std::to_string(columns.size()) + " fields as in the header, found " +
                 std::to_string(col));
    return true;
  }

  bool csv_field(Column kind, std::size_t col, std::string_view field, Request& out, Time& raw_time) {
    auto name = [&] { return "field '" + header_names[col] + "'"; };
    const bool optional = kind == Column::priority || kind == Column::session_id || kind == Column::session_text ||
                          kind == Column::cancel_s || kind == Column::hash_block_size ||
                          kind == Column::hash_ids || kind == Column::prompt_tokens;
    if (field.empty()) return optional ? true : bad("missing value for " + name());
    switch (kind) {
      case Column::datetime:
        if (!parse_datetime_ns(field, raw_time))
          return bad(name() + ": expected a time like 2023-11-16 18:15:46.6805900, got " + quoted(field));
        return true;
      case Column::seconds:
        if (!parse_decimal_time(field, kNsPerSec, raw_time))
          return bad(name() + ": expected a number of seconds, got " + quoted(field));
        return true;
      case Column::cancel_s:
        if (!parse_decimal_time(field, kNsPerSec, out.cancel_time))
          return bad(name() + ": expected a number of seconds, got " + quoted(field));
        return true;
      case Column::id:
        if (!parse_int64(field, out.id)) return bad(name() + ": expected an integer, got " + quoted(field));
        return true;
      case Column::session_id:
        if (!parse_int64(field, out.session_id))
          return bad(name() + ": expected an integer, got " + quoted(field));
        return true;
      case Column::session_text:
        out.session_id = session_from_text(field);
        return true;
      case Column::prompt_len:
      case Column::output_len:
      case Column::priority:
      case Column::hash_block_size: {
        std::int32_t v;
        if (!parse_int32(field, v)) return bad(name() + ": expected an integer, got " + quoted(field));
        if (kind == Column::prompt_len) out.prompt_len = v;
        if (kind == Column::output_len) out.output_len = v;
        if (kind == Column::priority) out.priority = v;
        if (kind == Column::hash_block_size) out.hash_block_size = v;
        return true;
      }
      case Column::hash_ids: {
        const std::string wrong = parse_list(
            field, out.hash_ids, [](std::string_view t, std::uint64_t& v) { return parse_uint64(t, v); },
            "expected space-separated non-negative integers");
        return wrong.empty() ? true : bad(name() + ": " + wrong);
      }
      case Column::prompt_tokens: {
        const std::string wrong = parse_list(
            field, out.prompt_tokens, [](std::string_view t, TokenId& v) { return parse_int32(t, v) && v >= 0; },
            "expected space-separated integers in 0..2^31-1");
        return wrong.empty() ? true : bad(name() + ": " + wrong);
      }
      case Column::ignore:
        return true;
    }
    return true;
  }

  bool json_time(JsonKey key, Time unit, Time& out, const char* what) {
    const JsonNumber& n = json.get(key);
    if (!n.present) return bad(std::string("missing field '") + what + "'");
    if (n.is_float) {
      if (!parse_decimal_time(n.text, unit, out))
        return bad(std::string("field '") + what + "' is out of range");
      return true;
    }
    const Time limit = std::numeric_limits<Time>::max() / unit;
    if (n.integer > limit || n.integer < -limit)
      return bad(std::string("field '") + what + "' is out of range");
    out = n.integer * unit;
    return true;
  }

  bool json_int(JsonKey key, std::int64_t lo, std::int64_t hi, std::int64_t& out, const char* what,
                bool required) {
    const JsonNumber& n = json.get(key);
    if (!n.present) return required ? bad(std::string("missing field '") + what + "'") : true;
    if (n.is_float) return bad(std::string("field '") + what + "' must be an integer, got " + quoted(n.text));
    if (n.integer < lo || n.integer > hi)
      return bad(std::string("field '") + what + "' = " + std::to_string(n.integer) + " is out of range");
    out = n.integer;
    return true;
  }

  bool json_row(std::string_view line, Request& out, Time& raw_time) {
    if (!json.parse(line, out.hash_ids, out.prompt_tokens, error)) return false;
    constexpr std::int64_t i32max = std::numeric_limits<std::int32_t>::max();
    constexpr std::int64_t i32min = std::numeric_limits<std::int32_t>::min();
    constexpr std::int64_t i64min = std::numeric_limits<std::int64_t>::min();
    constexpr std::int64_t i64max = std::numeric_limits<std::int64_t>::max();
    std::int64_t v = 0;
    if (format == TraceFormat::twin_jsonl) {
      if (!json_int(JsonKey::id, i64min, i64max, out.id, "id", true)) return false;
      if (!json_time(JsonKey::arrival_s, kNsPerSec, raw_time, "arrival_s")) return false;
      if (!json_int(JsonKey::prompt_len, i32min, i32max, v, "prompt_len", true)) return false;
      out.prompt_len = static_cast<std::int32_t>(v);
      if (!json_int(JsonKey::output_len, i32min, i32max, v, "output_len", true)) return false;
      out.output_len = static_cast<std::int32_t>(v);
      v = 0;
      if (!json_int(JsonKey::priority, i32min, i32max, v, "priority", false)) return false;
      out.priority = static_cast<std::int32_t>(v);
      if (!json_int(JsonKey::session_id, i64min, i64max, out.session_id, "session_id", false)) return false;
      v = 0;
      if (!json_int(JsonKey::hash_block_size, 0, i32max, v, "hash_block_size", false)) return false;
      out.hash_block_size = static_cast<std::int32_t>(v);
      if (json.get(JsonKey::cancel_s).present &&
          !json_time(JsonKey::cancel_s, kNsPerSec, out.cancel_time, "cancel_s"))
        return false;
      return true;
    }
    if (format == TraceFormat::llmservingsim) {
      // input_tok_ids land in prompt_tokens (json_row.cpp); output_tok_ids
      // are the reference reply, not needed to replay the request.
      if (!json_time(JsonKey::arrival_time_ns, 1, raw_time, "arrival_time_ns")) return false;
      if (!json_int(JsonKey::input_toks, i32min, i32max, v, "input_toks", true)) return false;
      out.prompt_len = static_cast<std::int32_t>(v);
      if (!json_int(JsonKey::output_toks, i32min, i32max, v, "output_toks", true)) return false;
      out.output_len = static_cast<std::int32_t>(v);
      return true;
    }
    // Mooncake and Bailian.
    const Time unit = format == TraceFormat::bailian ? kNsPerSec : kNsPerMs;
    if (!json_time(JsonKey::timestamp, unit, raw_time, "timestamp")) return false;
    if (!json_int(JsonKey::input_length, i32min, i32max, v, "input_length", true)) return false;
    out.prompt_len = static_cast<std::int32_t>(v);
    if (!json_int(JsonKey::output_length, i32min, i32max, v, "output_length", true)) return false;
    out.output_len = static_cast<std::int32_t>(v);
    if (!out.hash_ids.empty()) out.hash_block_size = block_size;
    std::int64_t chat = -1, parent = -1;
    if (!json_int(JsonKey::chat_id, i64min, i64max, chat, "chat_id", false)) return false;
    if (!json_int(JsonKey::parent_chat_id, i64min, i64max, parent, "parent_chat_id", false)) return false;
    if (json.get(JsonKey::chat_id).present) {
      // A session is named by the chat id of its first turn.
      std::int64_t root = chat;
      if (parent >= 0) {
        auto it = session_root.find(parent);
        root = it == session_root.end() ? parent : it->second;
      }
      session_root[chat] = root;
      out.session_id = root;
    }
    return true;
  }

  bool validate(const Request& out) {
    if (out.prompt_len < 0) return bad("negative prompt length " + std::to_string(out.prompt_len));
    if (out.output_len < 0) return bad("negative output length " + std::to_string(out.output_len));
    if (!out.prompt_tokens.empty() && out.prompt_tokens.size() != static_cast<std::size_t>(out.prompt_len))
      return bad("prompt_tokens holds " + std::to_string(out.prompt_tokens.size()) +
                 " tokens but prompt_len is " + std::to_string(out.prompt_len));
    if (!out.hash_ids.empty() && out.hash_block_size <= 0)
      return bad("hash_ids given without a positive hash_block_size");
    return true;
  }

  // Twin formats carry ids; results are keyed by them, so each must be new.
  // Records the id; false if it was seen before.
  bool is_new_id(std::int64_t id) {
    if (rebase) return true;  // foreign formats: ids are assigned 0..N-1
    auto next = seen_ids.upper_bound(id);  // first run starting after id
    if (next != seen_ids.begin()) {
      auto prev = std::prev(next);
      if (id <= prev->second) return false;
      if (prev->second + 1 == id) {  // extends the run before it
        prev->second = id;
        if (next != seen_ids.end() && next->first - 1 == id) {
          prev->second = next->second;
          seen_ids.erase(next);
        }
        return true;
      }
    }
    if (next != seen_ids.end() && next->first - 1 == id) {  // extends the run after it
      const std::int64_t last = next->second;
      seen_ids.erase(next);
      seen_ids.emplace(id, last);
      return true;
    }
    seen_ids.emplace(id, id);
    return true;
  }

  RowResult parse_line(std::string_view line, Request& out) {
    reset(out);
    Time raw_time = 0;
    const bool ok = is_json_format(format) ? json_row(line, out, raw_time) : csv_row(line, out, raw_time);
    if (!ok || !validate(out)) return RowResult::bad;
    if (format == TraceFormat::burstgpt && out.output_len == 0 && !options.keep_failed)
      return RowResult::failed;
    // Refused here, not later by the scheduler, so `trace stats` and the
    // simulator count the same requests.
    if (out.prompt_len == 0) return bad("prompt length 0: a request needs at least 1 prompt token"), RowResult::bad;
    if (arrivals) raw_time = arrivals->next();
    if (!rebase && raw_time < 0) return bad("negative arrival time"), RowResult::bad;
    if (out.cancel_time != kNoTime && out.cancel_time < raw_time) {
      std::string msg = "cancel_s ";
      append_seconds_9(msg, out.cancel_time);
      msg += " is before the arrival ";
      append_seconds_9(msg, raw_time);
      return bad(msg), RowResult::bad;
    }
    const Time base_now = rebase ? (have_base ? base : raw_time) : 0;
    Time t = 0;
    if (__builtin_sub_overflow(raw_time, base_now, &t))
      return bad("arrival time is out of range: over 292 years after the first row's"), RowResult::bad;
    bool clamped = false;
    if (have_last && t < last_arrival) {
      Time back = 0;
      if (__builtin_sub_overflow(last_arrival, t, &back))  // a row far before the first (fuzzer, ASan seed 21)
        return bad("arrival goes backwards by over 292 years"), RowResult::bad;
      if (back > tolerance_ns) {
        std::string msg = "arrival goes backwards by ";
        append_seconds_9(msg, back);
        msg += " s (tolerance " + std::to_string(options.backwards_tolerance_s) + " s)";
        return bad(msg), RowResult::bad;
      }
      t = last_arrival;
      clamped = true;
    }
    if (!is_new_id(out.id)) return bad("id " + std::to_string(out.id) + " appears twice"), RowResult::bad;
    // Accepted: commit the clock state.
    if (rebase && !have_base) {
      base = raw_time;
      have_base = true;
    }
    if (rebase && out.cancel_time != kNoTime) out.cancel_time -= base;
    have_last = true;
    last_arrival = t;
    if (clamped) ++report.reordered;
    out.arrival = t;
    if (format != TraceFormat::twin_jsonl && format != TraceFormat::twin_csv) out.id = next_id++;
    return RowResult::ok;
  }

  // A trace that yields nothing is a mistake (a header only, every row
  // skipped): say so rather than serve or simulate nothing and exit 0.
  std::string no_requests_message() const {
    std::string m = path + ": the trace holds no requests";
    if (report.skipped_bad > 0) {
      m += " (" + std::to_string(report.skipped_bad) + " bad rows skipped; the first: " + report.first_bad_row + ")";
    }
    if (report.skipped_failed > 0) {
      m += " (" + std::to_string(report.skipped_failed) + " failed requests skipped)";
    }
    return m;
  }

  void skip_or_throw(std::int64_t line_number) {
    std::string where = path + ":" + std::to_string(line_number) + ": " + error;
    if (options.on_bad_row == BadRowPolicy::error) throw Error(where);
    if (report.skipped_bad == 0) report.first_bad_row = where;
    ++report.skipped_bad;
  }

  // sharegpt: the turns of one conversation after another; a conversation
  // is a session. A malformed conversation is one bad row.
  bool next_turn_request(Request& out) {
    while (next_turn >= turns.size()) {
      std::string_view object;
      if (!conversations->next(object)) {
        if (report.rows == 0) throw Error(no_requests_message());
        return false;
      }
      next_turn = 0;
      if (!conversation_parser.parse(object, turns, error)) {
        turns.clear();
        skip_or_throw(conversations->line_number());
        continue;
      }
      if (!turns.empty()) current_session = next_session++;
    }
    const ConversationTurn& t = turns[next_turn++];
    reset(out);
    out.id = next_id++;
    out.arrival = arrivals->next();
    out.prompt_len = t.prompt_len;
    out.output_len = t.output_len;
    const auto& blocks = conversation_parser.blocks();
    out.hash_ids.assign(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(t.hash_blocks));
    if (!out.hash_ids.empty()) out.hash_block_size = kConversationHashBlock;
    out.session_id = current_session;
    ++report.rows;
    return true;
  }

  bool next(Request& out) {
    if (conversations) return next_turn_request(out);
    for (;;) {
      std::string_view line;
      if (pending) {
        pending = false;
        line = pending_line;
      } else if (!lines->next(line)) {
        if (report.rows == 0) throw Error(no_requests_message());
        return false;
      }
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      switch (parse_line(line, out)) {
        case RowResult::ok:
          ++report.rows;
          return true;
        case RowResult::failed:
          ++report.skipped_failed;
          continue;
        case RowResult::bad:
          skip_or_throw(lines->line_number());
          continue;
      }
    }
  }
};

TraceReader::TraceReader(const std::string& path, const TraceReadOptions& options)
    : impl_(std::make_unique<Impl>(path, options)) {}
TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

bool TraceReader::next(Request& out) { return impl_->next(out); }
const TraceReadReport& TraceReader::report() const { return impl_->report; }
TraceFormat TraceReader::format() const { return impl_->format; }
const std::string& TraceReader::path() const { return impl_->path; }

}  // namespace twin
