#pragma once
// Concrete prompt tokens for trace requests that carry only lengths or block
// hash ids, so the engine's prefix cache sees the sharing the trace describes:
// - with hash ids, token j of the trace block named h is a function of
//   (seed, h, j) alone: requests sharing a leading run of ids share that
//   token prefix (and the core hashes real tokens, as it would for text);
// - prompt positions no hash id covers, and length-only requests, get tokens
//   from (seed, request id, position): no accidental sharing. Such filler is
//   not content: named_prompt_tokens stops at it, so the prefix cache names
//   the same blocks as the simulator does from the hash ids.
#include <cstdint>

#include "engine/core/request.hpp"

namespace twin {

// Fills req.prompt_tokens (prompt_len tokens in [0, vocab_size)) unless the
// request already carries tokens; those are checked against the vocabulary
// (twin::Error naming the request and the token otherwise).
void materialize_prompt_tokens(Request& req, std::int64_t vocab_size, std::uint64_t seed);

}  // namespace twin
