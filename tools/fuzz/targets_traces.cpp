// Fuzz targets over the trace readers: one per format with the format forced
// (so a mutated header still reaches that format's row parser), plus one
// that detects the format as `trace stats FILE` does. Each input is read
// twice, as the commands read traces: bad rows an error, and bad rows skipped
// into the trace statistics; every request's prefix hash chain is built as
// the simulator builds it.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/kv_cache.hpp"
#include "tools/fuzz/fuzz_target.hpp"
#include "traces/trace_reader.hpp"
#include "traces/trace_stats.hpp"

namespace twin::fuzz {
namespace {

std::vector<std::string> azure_seeds() {
  return {"TIMESTAMP,ContextTokens,GeneratedTokens\n"
          "2023-11-16 18:15:46.6805900,374,44\n"
          "2023-11-16 18:15:50.9951690,396,109\n"
          "2023-11-16 18:15:51.0000000,1,1\n",
          "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2024-05-10T00:00:00.0000000,4808,10\r\n"
          "2024-05-10T00:00:00.5,3180,8\r\n",
          // Azure 2024 (UTC offsets) and 2025 multimodal (an extra column first).
          "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,4808,10\n"
          "2024-05-10 02:00:00.514102+02:00,3180,8\n2024-05-09 19:30:01-04:30,7,1\n2024-05-10T00:00:02Z,9,2\n",
          "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n2025-05-19 00:00:00.000000+00:00,1,2012,47\n"
          "2025-05-19 00:00:00.250000+00:00,0,355,181\n"};
}

std::vector<std::string> burstgpt_seeds() {
  return {"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
          "5,ChatGPT,472,18,490,Conversation log\n"
          "45,ChatGPT,1087,0,1087,Conversation log\n"
          "118,GPT-4,417,276,693,API log\n",
          "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
          "0.5,a1b2,1.25,ChatGPT,100,20,120,Conversation log\n"
          "2.75,a1b2,0.5,ChatGPT,200,30,230,Conversation log\n"
          "3,17,0.5,ChatGPT,200,30,230,Conversation log\n"};
}

std::vector<std::string> mooncake_seeds() {
  return {"{\"timestamp\": 27482, \"input_length\": 1024, \"output_length\": 10, \"hash_ids\": [0, 1]}\n"
          "{\"timestamp\": 27493, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [0, 2]}\n"
          "\n"
          "{\"timestamp\": 27493.5, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [3, 4]}\n"};
}

std::vector<std::string> bailian_seeds() {
  return {"{\"chat_id\": 159, \"parent_chat_id\": -1, \"timestamp\": 61.114, \"input_length\": 40, "
          "\"output_length\": 132, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [1, 2, 3]}\n"
          "{\"chat_id\": 160, \"parent_chat_id\": 159, \"timestamp\": 75.5, \"input_length\": 200, "
          "\"output_length\": 50, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]}\n"
          "{\"chat_id\": 161, \"parent_chat_id\": -1, \"timestamp\": 80, \"input_length\": 16, "
          "\"output_length\": 3, \"type\": \"image\", \"turn\": 1, \"hash_ids\": [20]}\n"};
}

std::vector<std::string> vidur_seeds() {
  return {"arrived_at,num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
          "0.0,100,10,110,10.0\n0.25,200,20,220,10.0\n1.5,300,30,330,10.0\n"};
}

std::vector<std::string> vidur_lengths_seeds() {
  return {"num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n254,118,372,2.15\n1024,12,1036,85.3\n"
          "77,512,589,0.15\n"};
}

std::vector<std::string> splitwise_seeds() {
  return {"request_id,request_type,application_id,arrival_timestamp,batch_size,prompt_size,token_size\n"
          "0,2,0,0.0,1,1020,129\n1,2,0,0.125,1,374,44\n2,2,0,1.5,1,2735,424\n"};
}

std::vector<std::string> llmservingsim_seeds() {
  return {"{\"input_toks\":4,\"output_toks\":12,\"arrival_time_ns\":570907776,\"input_tok_ids\":[1,1,235,236],"
          "\"output_tok_ids\":[1,1,237,238,239,240,241,242,243,244,245,246]}\n"
          "{\"input_toks\":2,\"output_toks\":9,\"arrival_time_ns\":811936856,\"input_tok_ids\":[465,466]}\n"
          "{\"input_toks\":5,\"output_toks\":26,\"arrival_time_ns\":1026970077}\n"};
}

std::vector<std::string> sharegpt_seeds() {
  return {"[\n  {\n    \"id\": \"a\",\n    \"conversations\": [\n"
          "      {\"from\": \"human\", \"value\": \"What is the capital of France? Please answer in one word only.\"},\n"
          "      {\"from\": \"gpt\", \"value\": \"Paris.\"},\n      {\"from\": \"human\", \"value\": \"And of Italy?\"},\n"
          "      {\"from\": \"gpt\", \"value\": \"Rome.\"}\n    ]\n  },\n"
          "  {\"id\": \"b\", \"conversations\": [{\"from\": \"system\", \"value\": \"Be brief.\"}, "
          "{\"from\": \"human\", \"value\": \"Hi \\u00e9t\\u00e9\"}, {\"from\": \"gpt\", \"value\": \"\"}]}\n]\n",
          "{\"messages\": [{\"role\": \"user\", \"content\": \"Count to three.\"}, {\"role\": \"assistant\", "
          "\"content\": \"One, two, three.\"}]}\n"
          "{\"messages\": [{\"role\": \"system\", \"content\": null}, {\"role\": \"user\", \"content\": \"x\"}, "
          "{\"role\": \"assistant\", \"content\": \"y\"}]}\n"};
}

// Azure and Mooncake seeds, gzip and zstd compressed (made with Python's
// gzip module, mtime 0, and the zstd command).
std::vector<std::string> compressed_seeds() {
  return {std::string(
          "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\x0b\xf1\xf4\x75\x0d\x0e\x71\xf4\x0d\xd0\x71\xce\xcf\x2b"
          "\x49\xad\x28\x09\xc9\xcf\x4e\xcd\x2b\xd6\x71\x4f\xcd\x4b\x2d\x4a\x2c\x49\x4d\x81\xf0\xb9\x8c\x0c"
          "\x8c\x4c\x74\x0d\x4c\x75\x0d\x0d\x14\x0c\x0c\xac\xc0\x48\xcf\xc0\xc0\xd2\xd2\xd8\x40\x1b\xcc\xd1"
          "\x31\xb1\x30\xb0\xd0\x31\x34\xc0\xaa\xd0\xd4\xd0\xc4\xd0\xc0\x08\xaa\xd0\xd8\xd0\xc2\x40\xc7\x82"
          "\x0b\x00\xed\x57\x9c\x5e\x79\x00\x00\x00",
          106),
          std::string(
          "\x28\xb5\x2f\xfd\x04\x58\xd5\x02\x00\xd2\x04\x12\x19\x70\x55\x75\x70\x55\x5a\xc1\x3b\x41\x8f\x1f"
          "\x10\x36\xde\x28\xac\xdd\x5b\x16\x6b\x4d\x80\x8b\x22\x04\x88\xf5\xbc\x4b\x7d\xd9\xb6\xaf\xf2\x99"
          "\xa9\xf0\xe5\xdc\x3f\x10\x7f\xf0\x4d\xed\x89\xa9\x2b\xd4\xf4\x64\x9e\x8e\x8d\x28\x20\xb6\x23\xe1"
          "\x0c\xf4\x8c\xd2\x50\xe5\x15\x70\x39\x5e\x02\x03\x05\x00\x20\x2b\x4c\x3d\x87\xd9\x38\x9d\xa8\x99"
          "\x61\x92\x01\xb5\x8d\xd0\xa7",
          103),
          std::string(
          "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xab\x56\x2a\xc9\xcc\x4d\x2d\x2e\x49\xcc\x2d\x50\xb2\x52"
          "\x30\x32\x37\xb1\x30\xd2\x51\x50\xca\xcc\x2b\x28\x2d\x89\xcf\x49\xcd\x4b\x2f\xc9\x00\x0a\x1b\x1a"
          "\x18\x99\x00\x45\xf3\x4b\x4b\xd0\x84\x81\x82\x19\x89\xc5\x19\xf1\x99\x29\xc5\x40\x7e\x34\x90\x6f"
          "\x18\x5b\xcb\x55\x8d\x6e\xa6\xa5\x31\xa6\x99\xe6\x06\x06\x58\x8c\x34\xc5\x34\xd1\x08\x68\x22\x00"
          "\x89\x7d\x01\x61\xa6\x00\x00\x00",
          104),
          std::string(
          "\x28\xb5\x2f\xfd\x04\x58\xe5\x02\x00\xf2\x44\x12\x18\x80\xa7\x0e\x5a\x99\x59\xd6\x86\x30\x3d\xdb"
          "\x19\x91\x60\xb1\xe5\xd3\x73\x26\x4e\x27\x55\x7d\x04\x63\x22\x2f\xba\x0d\x11\x18\x13\x11\xe5\x16"
          "\xe8\xd9\x38\x68\x89\x45\xc5\x56\xf9\xa5\x61\x95\x8b\x37\xd1\xb3\xec\x09\x6f\x15\xd2\x4b\xf8\xda"
          "\x2a\x3b\xa0\x18\xd7\xb3\xd0\xa9\x8f\xcb\xb5\xdf\x43\x05\x00\x55\x78\xc2\x0a\xc9\x00\x0f\xbb\xc2"
          "\xdc\xae\xdd\x2c\x03\x39\x3d\xe8\xb1",
          105)};
}

std::vector<std::string> twin_jsonl_seeds() {
  return {"{\"id\":0,\"arrival_s\":0.000000000,\"prompt_len\":40,\"output_len\":18,\"priority\":0,"
          "\"session_id\":0,\"hash_block_size\":16,\"hash_ids\":[193,194,195]}\n"
          "{\"id\":1,\"arrival_s\":0.326445170,\"prompt_len\":25,\"output_len\":9,\"priority\":1,"
          "\"session_id\":-1,\"cancel_s\":0.5}\n"
          "{\"id\":2,\"arrival_s\":0.352864178,\"prompt_len\":4,\"output_len\":7,\"priority\":0,"
          "\"session_id\":2,\"prompt_tokens\":[1,2,3,4]}\n"};
}

std::vector<std::string> twin_csv_seeds() {
  return {"id,arrival_s,prompt_len,output_len,priority,session_id,cancel_s,hash_block_size,hash_ids,prompt_tokens\n"
          "0,0.000000000,40,18,0,0,,16,193 194 195,\n"
          "1,0.326445170,25,9,1,-1,0.500000000,,,\n"
          "2,0.352864178,4,7,0,2,,,,1 2 3 4\n"};
}

std::vector<std::string> any_seeds() {
  std::vector<std::string> all;
  // Not the formats without arrival times: without --rate they are refused
  // by design (their own targets give a rate).
  for (auto* seeds : {azure_seeds, burstgpt_seeds, mooncake_seeds, bailian_seeds, vidur_seeds, splitwise_seeds,
                      llmservingsim_seeds, twin_jsonl_seeds, twin_csv_seeds, compressed_seeds}) {
    for (auto& s : seeds()) all.push_back(std::move(s));
  }
  return all;
}

template <TraceFormat F>
void run_trace(const std::string& input, const Scratch& scratch) {
  const std::string path = scratch.write("trace", input);
  TraceReadOptions options;
  options.format = F;
  // Traces without arrival times take them from a rate, as `trace stats
  // --rate` gives them; detected ones are read as a command without --rate
  // reads them (refused, naming the file).
  if (is_length_only(F)) options.arrivals.rate = 2.5;
  {
    TraceReader reader(path, options);
    Request req;
    // Hashed as a run hashes them: only requests a KV cache could hold
    // (Scheduler::rejection_reason refuses longer ones first). Unbounded, a
    // row with prompt_len 2^31-1 asks for 2^27 hashes, 1 GiB.
    constexpr std::int32_t kLongestContext = 1 << 20;
    while (reader.next(req)) {
      if (req.prompt_len <= kLongestContext) (void)prompt_block_hashes(req, 16);
    }
  }
  options.on_bad_row = BadRowPolicy::skip;
  options.keep_failed = true;
  TraceReader reader(path, options);
  (void)compute_stats(reader);
}

// Row errors are "FILE:LINE: problem"; whole-file ones name the file.
bool names_trace_file(const std::string& message, const Scratch& scratch) {
  return message.find(scratch.path("trace")) != std::string::npos;
}

}  // namespace

std::vector<FuzzTarget> trace_targets() {
  const auto target = [](const char* name, const char* summary, std::vector<std::string> (*seeds)(),
                         void (*run)(const std::string&, const Scratch&)) {
    return FuzzTarget{name, summary, FuzzTarget{}.max_bytes, seeds, run, names_trace_file};
  };
  return {
      target("trace-azure", "Azure LLM inference CSV (TraceReader, format azure)", azure_seeds,
             run_trace<TraceFormat::azure>),
      target("trace-burstgpt", "BurstGPT CSV", burstgpt_seeds, run_trace<TraceFormat::burstgpt>),
      target("trace-mooncake", "Mooncake JSONL", mooncake_seeds, run_trace<TraceFormat::mooncake>),
      target("trace-bailian", "Qwen-Bailian JSONL", bailian_seeds, run_trace<TraceFormat::bailian>),
      target("trace-vidur", "Vidur / Splitwise CSV", vidur_seeds, run_trace<TraceFormat::vidur>),
      target("trace-vidur-lengths", "Vidur length-only CSV, arrivals from a rate", vidur_lengths_seeds,
             run_trace<TraceFormat::vidur_lengths>),
      target("trace-splitwise", "Splitwise-sim CSV", splitwise_seeds, run_trace<TraceFormat::splitwise>),
      target("trace-llmservingsim", "LLMServingSim JSONL", llmservingsim_seeds, run_trace<TraceFormat::llmservingsim>),
      target("trace-sharegpt", "ShareGPT conversations (JSON array or JSONL), arrivals from a rate", sharegpt_seeds,
             run_trace<TraceFormat::sharegpt>),
      target("trace-compressed", "gzip and zstd traces (format detected)", compressed_seeds,
             run_trace<TraceFormat::auto_detect>),
      target("trace-twin-jsonl", "twinserve JSONL", twin_jsonl_seeds, run_trace<TraceFormat::twin_jsonl>),
      target("trace-twin-csv", "twinserve CSV", twin_csv_seeds, run_trace<TraceFormat::twin_csv>),
      target("trace-auto", "any trace, format detected from the first line", any_seeds,
             run_trace<TraceFormat::auto_detect>),
  };
}

}  // namespace twin::fuzz
