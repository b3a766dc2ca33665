#include "engine/core/router_snapshot.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace twin {

ReplicaFigures load_of(const Replica& replica) {
  ReplicaFigures load;
  load.outstanding = replica.num_outstanding();
  load.kv_usage = replica.kv_usage();
  load.waiting = replica.num_waiting();
  load.running = replica.num_running();
  load.kv_blocks = replica.config().kv.num_blocks;
  load.block_size = replica.config().kv.block_size;
  return load;
}

void RouterSnapshot::refresh(std::vector<ReplicaFigures> loads) {
  loads_ = std::move(loads);
  sent_.assign(loads_.size(), 0);
  sent_blocks_.assign(loads_.size(), 0);
  hits_ = {};
}

void RouterSnapshot::sent(std::int32_t i, const Request& request) {
  const auto k = static_cast<std::size_t>(i);
  const std::int64_t block = std::max<std::int32_t>(1, loads_[k].block_size);
  ++sent_[k];
  sent_blocks_[k] += (static_cast<std::int64_t>(request.prompt_len) + block - 1) / block;
}

double RouterSnapshot::kv_usage(std::int32_t i) const {
  const auto k = static_cast<std::size_t>(i);
  if (sent_blocks_[k] == 0) return loads_[k].kv_usage;
  const auto blocks = static_cast<double>(std::max<std::int64_t>(1, loads_[k].kv_blocks));
  return loads_[k].kv_usage + static_cast<double>(sent_blocks_[k]) / blocks;
}

std::int32_t RouterSnapshot::cached_prefix_tokens(std::int32_t i, const Request& request) const {
  if (hits_.size() != loads_.size()) {
    throw Error("router snapshot: request " + std::to_string(request.id) +
                " asks for prefix hits, but none were set for it");
  }
  return hits_[static_cast<std::size_t>(i)];
}

}  // namespace twin
