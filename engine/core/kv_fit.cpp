#include "engine/core/kv_fit.hpp"

#include <cmath>

#include "base/error.hpp"

namespace twin {
namespace {

// vLLM's format_gib: two decimals of GiB (no printf here: the core does no I/O).
std::string gib(double bytes) {
  const long long hundredths = std::llround(bytes / (1024.0 * 1024.0 * 1024.0) * 100.0);
  const std::string cents = std::to_string(hundredths % 100);
  return std::to_string(hundredths / 100) + "." + (cents.size() < 2 ? "0" : "") + cents;
}

}  // namespace

double kv_bytes_for_tokens(std::int64_t tokens, std::int32_t block_size, double block_bytes) {
  const std::int64_t blocks = (tokens + block_size - 1) / block_size;
  return static_cast<double>(blocks) * block_bytes;
}

KvFit check_kv_fit(double available_bytes, double block_bytes, std::int32_t block_size, std::int32_t max_model_len) {
  if (block_size < 1) throw UsageError("KV fit check: block_size must be >= 1");
  if (!(block_bytes > 0)) throw UsageError("KV fit check: a block must take memory");
  if (max_model_len < 1) throw UsageError("KV fit check: max_model_len must be >= 1");
  KvFit fit;
  fit.max_model_len = max_model_len;
  fit.block_size = block_size;
  fit.block_bytes = block_bytes;
  fit.available_bytes = available_bytes;
  fit.needed_bytes = kv_bytes_for_tokens(max_model_len, block_size, block_bytes);
  const auto fits = [&](std::int64_t len) { return kv_bytes_for_tokens(len, block_size, block_bytes) <= available_bytes; };
  // As vLLM's estimate: the largest length in [1, max_model_len] whose need
  // fits, 0 when not even one token does.
  if (!fits(1)) return fit;
  std::int64_t lo = 1, hi = max_model_len, best = 1;
  while (lo <= hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      best = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  fit.largest_fitting = static_cast<std::int32_t>(best);
  return fit;
}

std::string kv_fit_refusal(const KvFit& f) {
  if (!(f.available_bytes > 0)) {
    return "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the "
           "engine.";
  }
  std::string estimated;
  if (f.largest_fitting > 0) {
    estimated = "Based on the available memory, the estimated maximum model length is " +
                std::to_string(f.largest_fitting) + ". ";
  }
  // vLLM's own words (its typo included), so a user searching for them finds both.
  return "To serve at least one request with the models's max seq len (" + std::to_string(f.max_model_len) + "), (" +
         gib(f.needed_bytes) + " GiB KV cache is needed, which is larger than the available KV cache memory (" +
         gib(f.available_bytes) + " GiB). " + estimated +
         "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.";
}

std::string kv_fit_verdict(const KvFit& f) {
  std::string out = "vLLM start-up check: one request of max_model_len " + std::to_string(f.max_model_len) + " needs " +
                    gib(f.needed_bytes) + " GiB of KV per GPU, " + gib(f.available_bytes) + " GiB available: ";
  if (f.fits()) return out + "ok";
  return out + "vLLM refuses to start (the largest max_model_len that fits is " + std::to_string(f.largest_fitting) +
         "; --max-model-len auto lowers it to that)";
}

}  // namespace twin
