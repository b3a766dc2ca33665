// Fuzz targets over the trace readers: one per format with the format forced
// (so a mutated header still reaches that format's row parser), plus one
// that detects the format as `trace stats FILE` does. Each input is read
// twice, as the commands read traces: bad rows an error, and bad rows skipped
// into the trace statistics; every request's prefix hash chain is built as
// the simulator builds it.
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
          "2024-05-10T00:00:00.5,3180,8\r\n"};
}

std::vector<std::string> burstgpt_seeds() {
  return {"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
          "5,ChatGPT,472,18,490,Conversation log\n"
          "45,ChatGPT,1087,0,1087,Conversation log\n"
          "118,GPT-4,417,276,693,API log\n",
          "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
          "0.5,a1b2,1.25,ChatGPT,100,20,120,Conversation log\n"
          "2.75,a1b2,0.5,ChatGPT,200,30,230,Conversation log\n"};
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
  for (auto* seeds : {azure_seeds, burstgpt_seeds, mooncake_seeds, bailian_seeds, vidur_seeds, twin_jsonl_seeds,
                      twin_csv_seeds}) {
    for (auto& s : seeds()) all.push_back(std::move(s));
  }
  return all;
}

template <TraceFormat F>
void run_trace(const std::string& input, const Scratch& scratch) {
  const std::string path = scratch.write("trace", input);
  TraceReadOptions options;
  options.format = F;
  {
    TraceReader reader(path, options);
    Request req;
    while (reader.next(req)) (void)prompt_block_hashes(req, 16);
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
      target("trace-twin-jsonl", "twinserve JSONL", twin_jsonl_seeds, run_trace<TraceFormat::twin_jsonl>),
      target("trace-twin-csv", "twinserve CSV", twin_csv_seeds, run_trace<TraceFormat::twin_csv>),
      target("trace-auto", "any trace, format detected from the first line", any_seeds,
             run_trace<TraceFormat::auto_detect>),
  };
}

}  // namespace twin::fuzz
