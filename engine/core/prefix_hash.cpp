#include "engine/core/prefix_hash.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/core/kv_cache.hpp"

namespace twin {

BlockHash hash_token_block(BlockHash parent, std::span<const TokenId> tokens) {
  std::uint64_t h = hash_combine(kTokenChainSeed, parent);
  // Two 32-bit tokens per word halves the number of mixing rounds.
  std::size_t i = 0;
  for (; i + 1 < tokens.size(); i += 2) {
    const auto lo = static_cast<std::uint32_t>(tokens[i]);
    const auto hi = static_cast<std::uint32_t>(tokens[i + 1]);
    h = hash_combine(h, (static_cast<std::uint64_t>(hi) << 32) | lo);
  }
  if (i < tokens.size()) {
    // An odd tail word is tagged so that it differs from any packed pair.
    h = hash_combine(h, static_cast<std::uint32_t>(tokens[i]) | (0xFFFFFFFFull << 32));
  }
  return hash_combine(h, tokens.size());
}

BlockHash hash_trace_block(BlockHash parent, std::span<const TraceSegment> segments) {
  std::uint64_t h = hash_combine(kTraceChainSeed, parent);
  for (const TraceSegment& s : segments) {
    h = hash_combine(h, s.trace_id);
    h = hash_combine(h, (static_cast<std::uint64_t>(static_cast<std::uint32_t>(s.begin)) << 32) |
                            static_cast<std::uint32_t>(s.end));
  }
  return hash_combine(h, segments.size());
}

namespace {

void hash_tokens(const Request& req, std::int32_t block_size, std::vector<BlockHash>& out) {
  if (static_cast<std::int64_t>(req.prompt_tokens.size()) != req.prompt_len) {
    throw Error("request " + std::to_string(req.id) + ": prompt_tokens has " +
                std::to_string(req.prompt_tokens.size()) + " tokens, expected prompt_len " +
                std::to_string(req.prompt_len));
  }
  const std::int32_t named =
      req.named_prompt_tokens < 0 ? req.prompt_len : std::min(req.named_prompt_tokens, req.prompt_len);
  const std::int32_t full = named / block_size;
  out.reserve(static_cast<std::size_t>(full));
  BlockHash parent = 0;
  for (std::int32_t k = 0; k < full; ++k) {
    const std::span<const TokenId> block(req.prompt_tokens.data() + static_cast<std::size_t>(k) * block_size,
                                         static_cast<std::size_t>(block_size));
    parent = hash_token_block(parent, block);
    out.push_back(parent);
  }
}

void hash_trace_ids(const Request& req, std::int32_t block_size, std::vector<BlockHash>& out) {
  const std::int64_t t = req.hash_block_size;
  if (t <= 0) {
    throw Error("request " + std::to_string(req.id) + ": hash_block_size is " + std::to_string(t) +
                ", expected a positive token count when hash_ids are given");
  }
  // Our block k is full when the prompt covers it and the trace names all of it.
  const std::int64_t covered = std::min<std::int64_t>(req.prompt_len,
                                                      static_cast<std::int64_t>(req.hash_ids.size()) * t);
  const std::int64_t full = covered / block_size;
  out.reserve(static_cast<std::size_t>(full));
  // A block of B tokens touches at most ceil(B / T) + 1 trace blocks; B <= 512.
  TraceSegment segments[514];
  BlockHash parent = 0;
  for (std::int64_t k = 0; k < full; ++k) {
    const std::int64_t lo = k * block_size;
    const std::int64_t hi = lo + block_size;
    std::size_t n = 0;
    for (std::int64_t j = lo / t; j * t < hi; ++j) {
      const std::int64_t seg_lo = std::max(lo, j * t) - j * t;
      const std::int64_t seg_hi = std::min(hi, (j + 1) * t) - j * t;
      segments[n++] = TraceSegment{req.hash_ids[static_cast<std::size_t>(j)], static_cast<std::int32_t>(seg_lo),
                                   static_cast<std::int32_t>(seg_hi)};
    }
    parent = hash_trace_block(parent, std::span<const TraceSegment>(segments, n));
    out.push_back(parent);
  }
}

// The spans must lie in the prompt, ascending and disjoint.
void check_generated(const Request& req) {
  std::int32_t previous_end = 0;
  for (const GeneratedSpan& g : req.generated) {
    if (g.begin < previous_end || g.end <= g.begin || g.end > req.prompt_len) {
      throw Error("request " + std::to_string(req.id) + ": generated span [" + std::to_string(g.begin) + ", " +
                  std::to_string(g.end) + ") of request " + std::to_string(g.request) +
                  " is not inside its prompt of " + std::to_string(req.prompt_len) +
                  " tokens after the spans before it");
    }
    previous_end = g.end;
  }
}

// Appends the trace segments naming prompt tokens [lo, hi); false if a token
// there has no hash id.
bool append_trace_segments(const Request& req, std::int64_t lo, std::int64_t hi, std::vector<TraceSegment>& out) {
  const std::int64_t t = req.hash_block_size;
  if (t <= 0 || hi > static_cast<std::int64_t>(req.hash_ids.size()) * t) return false;
  for (std::int64_t j = lo / t; j * t < hi; ++j) {
    const std::int64_t seg_lo = std::max(lo, j * t) - j * t;
    const std::int64_t seg_hi = std::min(hi, (j + 1) * t) - j * t;
    out.push_back(TraceSegment{req.hash_ids[static_cast<std::size_t>(j)], static_cast<std::int32_t>(seg_lo),
                               static_cast<std::int32_t>(seg_hi)});
  }
  return true;
}

// A prompt that repeats earlier answers (sessions). A block whose last token
// one of them generated is named as that request named it; any other block
// by its pieces: trace segments, and for a generated head the generating
// request and the positions. The chain stops at the first block with a token
// nothing names.
void hash_with_generated(const Request& req, std::int32_t block_size, std::vector<BlockHash>& out) {
  check_generated(req);
  const std::int32_t full = req.prompt_len / block_size;
  std::vector<TraceSegment> segments;
  std::size_t first = 0;  // the first span ending after the block's start
  BlockHash parent = 0;
  for (std::int32_t k = 0; k < full; ++k) {
    const std::int64_t lo = static_cast<std::int64_t>(k) * block_size;
    const std::int64_t hi = lo + block_size;
    while (first < req.generated.size() && req.generated[first].end <= lo) ++first;
    std::size_t last = first;  // the span holding the block's last token, if any
    while (last < req.generated.size() && req.generated[last].end < hi) ++last;
    if (last < req.generated.size() && req.generated[last].begin < hi) {
      parent = generated_block_hash(parent, req.generated[last].request, k);
      out.push_back(parent);
      continue;
    }
    segments.clear();
    std::int64_t pos = lo;
    for (std::size_t g = first; pos < hi; ++g) {
      const std::int64_t span_begin = g < req.generated.size() ? std::min<std::int64_t>(req.generated[g].begin, hi) : hi;
      if (pos < span_begin && !append_trace_segments(req, pos, span_begin, segments)) return;
      if (span_begin >= hi) break;
      const GeneratedSpan& span = req.generated[g];
      segments.push_back(TraceSegment{hash_combine(kGeneratedChainSeed, static_cast<std::uint64_t>(span.request)),
                                      static_cast<std::int32_t>(std::max<std::int64_t>(lo, span.begin)), span.end});
      pos = span.end;
    }
    parent = hash_trace_block(parent, segments);
    out.push_back(parent);
  }
}

}  // namespace

std::vector<BlockHash> prompt_block_hashes(const Request& req, std::int32_t block_size) {
  if (block_size < 1 || block_size > 512) {
    throw UsageError("block size " + std::to_string(block_size) + " is out of range: expected 1 to 512");
  }
  std::vector<BlockHash> out;
  if (!req.generated.empty()) {
    if (!req.prompt_tokens.empty()) {
      throw Error("request " + std::to_string(req.id) + ": a prompt that repeats earlier answers is named by hash ids, not tokens");
    }
    hash_with_generated(req, block_size, out);
  } else if (!req.prompt_tokens.empty()) {
    hash_tokens(req, block_size, out);
  } else if (!req.hash_ids.empty()) {
    hash_trace_ids(req, block_size, out);
  }
  return out;
}

}  // namespace twin
