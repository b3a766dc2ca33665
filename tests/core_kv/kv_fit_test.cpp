// vLLM's start-up check (engine/core/kv_fit.hpp): one request of
// max_model_len must fit in the KV cache; the largest that fits is vLLM's
// binary-search estimate.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.hpp"
#include "engine/core/kv_fit.hpp"

namespace twin {
namespace {

TEST_CASE("a KV cache that holds max_model_len passes the check") {
  const KvFit fit = check_kv_fit(1000.0 * 16, 16, 16, 16000);  // 1000 blocks of 16 tokens, 16 bytes each
  CHECK(fit.fits());
  CHECK(fit.needed_bytes == 16000);
  CHECK(fit.largest_fitting == 16000);
}

TEST_CASE("the largest max_model_len that fits is whole blocks of the memory, as vLLM's binary search finds") {
  // 999.5 blocks' worth: 999 whole blocks, 15,984 tokens.
  const KvFit fit = check_kv_fit(999.5 * 100, 100, 16, 131072);
  CHECK_FALSE(fit.fits());
  CHECK(fit.largest_fitting == 999 * 16);
  CHECK(fit.needed_bytes == 8192.0 * 100);
  // One token more than the cache holds needs one more block.
  CHECK_FALSE(check_kv_fit(999.5 * 100, 100, 16, 999 * 16 + 1).fits());
  CHECK(check_kv_fit(999.5 * 100, 100, 16, 999 * 16).fits());
  // Every block size and length gives the closed form, capped at max_model_len.
  for (const std::int32_t bs : {1, 16, 32, 128}) {
    for (const std::int32_t len : {1, 7, 4096, 100'000}) {
      const KvFit f = check_kv_fit(123'456.0, 10, bs, len);
      CHECK(f.largest_fitting == std::min<std::int64_t>(len, std::int64_t{12'345} * bs));  // 12,345 whole blocks
    }
  }
  // Not one block: nothing fits.
  CHECK(check_kv_fit(50, 100, 16, 4096).largest_fitting == 0);
}

TEST_CASE("the refusal is vLLM's sentence with its figures") {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const KvFit fit = check_kv_fit(7.5 * gib, 5.0 * 1024 * 1024, 16, 131072);
  const std::string text = kv_fit_refusal(fit);
  CHECK_THAT(text, Catch::StartsWith("To serve at least one request with the models's max seq len (131072), (40.00 GiB KV "
                                     "cache is needed, which is larger than the available KV cache memory (7.50 GiB). "
                                     "Based on the available memory, the estimated maximum model length is 24576. "
                                     "Try increasing `gpu_memory_utilization` or decreasing `max_model_len`"));
  CHECK_THAT(kv_fit_verdict(fit), Catch::Contains("vLLM refuses to start (the largest max_model_len that fits is 24576"));
  CHECK_THAT(kv_fit_verdict(check_kv_fit(7.5 * gib, 5.0 * 1024 * 1024, 16, 8192)), Catch::EndsWith(": ok"));
}

TEST_CASE("the check refuses meaningless inputs") {
  CHECK_THROWS_AS(check_kv_fit(100, 0, 16, 10), UsageError);
  CHECK_THROWS_AS(check_kv_fit(100, 10, 0, 10), UsageError);
  CHECK_THROWS_AS(check_kv_fit(100, 10, 16, 0), UsageError);
}

}  // namespace
}  // namespace twin
