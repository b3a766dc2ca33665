#pragma once
// The trace formats twinserve reads, and how each is recognised from the
// first line of a file.
#include <string>
#include <string_view>

namespace twin {

enum class TraceFormat {
  auto_detect,
  azure,       // Azure LLM inference 2023/2024 CSV: TIMESTAMP,ContextTokens,GeneratedTokens
  burstgpt,    // BurstGPT CSV: Timestamp,Model,Request tokens,Response tokens,...
  mooncake,    // Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids
  bailian,     // Qwen-Bailian JSONL: as Mooncake plus chat_id/parent_chat_id/turn, timestamp in s
  vidur,       // Vidur / Splitwise processed CSV: arrived_at (s),num_prefill_tokens,num_decode_tokens
  twin_jsonl,  // twinserve's own JSONL (docs/traces.md)
  twin_csv,    // twinserve's own CSV (docs/traces.md)
};

// "azure", "burstgpt", ... as the --format option spells them.
std::string_view format_name(TraceFormat format);
// Throws UsageError listing the known names.
TraceFormat parse_format_name(std::string_view name);
// Comma-separated list of the names, for help texts.
std::string known_format_names();

// Recognises a format from the first non-empty line of a file; auto_detect if
// none matches.
TraceFormat detect_format(std::string_view first_line);

}  // namespace twin
