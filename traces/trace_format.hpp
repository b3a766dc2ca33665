#pragma once
// The trace formats twinserve reads, and how each is recognised: by the set
// of column names in a CSV header, or of keys in the first JSON record (any
// order, extra ones ignored).
#include <string>
#include <string_view>

namespace twin {

enum class TraceFormat {
  auto_detect,
  azure,          // Azure LLM inference 2023/2024/2025 CSV: TIMESTAMP,ContextTokens,GeneratedTokens (+NumImages)
  burstgpt,       // BurstGPT CSV: Timestamp,Model,Request tokens,Response tokens,... (+Session ID)
  mooncake,       // Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids
  bailian,        // Qwen-Bailian JSONL: as Mooncake plus chat_id/parent_chat_id/turn, timestamp in s
  vidur,          // Vidur / Splitwise processed CSV: arrived_at (s),num_prefill_tokens,num_decode_tokens
  vidur_lengths,  // Vidur length-only CSV: num_prefill_tokens,num_decode_tokens (arrivals from a rate)
  splitwise,      // Splitwise-sim CSV: arrival_timestamp (s),prompt_size,token_size
  llmservingsim,  // LLMServingSim JSONL: input_toks, output_toks, arrival_time_ns, input_tok_ids
  sharegpt,       // ShareGPT conversations, JSON array or JSONL (arrivals from a rate)
  twin_jsonl,     // twinserve's own JSONL (docs/traces.md)
  twin_csv,       // twinserve's own CSV (docs/traces.md)
};

// "azure", "burstgpt", ... as the --format option spells them.
std::string_view format_name(TraceFormat format);
// Throws UsageError listing the known names.
TraceFormat parse_format_name(std::string_view name);
// Comma-separated list of the names, for help texts.
std::string known_format_names();
// "azure (TIMESTAMP,ContextTokens,GeneratedTokens), burstgpt (...), ...":
// what each format is recognised by, for the "no format matches" error.
std::string format_signatures();

// Whether rows are JSON (one object per line, or a JSON array for sharegpt).
bool is_json_format(TraceFormat format);
// Whether the format's rows carry no arrival time, so arrivals come from an
// arrival process (TraceReadOptions::arrivals).
bool is_length_only(TraceFormat format);

// Recognises a format from the first non-empty line of a file: the format
// whose required columns (keys) are all present; where several match, the
// one requiring the most. auto_detect if none matches.
TraceFormat detect_format(std::string_view first_line);

}  // namespace twin
