#include "engine/runtime/kv_tier_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "base/error.hpp"

namespace twin {

namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

KvTierStore::KvTierStore(Backend& backend, std::span<const KvCacheView> device, std::vector<KvTierStoreConfig> tiers)
    : backend_(backend) {
  if (device.empty()) throw Error("kv tiers: the device cache has no layers");
  proto_ = device.front();
  proto_.k = proto_.v = nullptr;
  layers_ = device.size();
  per_tensor_ = proto_.block_elems() * static_cast<std::int64_t>(elem_bytes(proto_.dtype));
  for (KvTierStoreConfig& c : tiers) {
    if (c.num_blocks < 1) throw UsageError("kv tier '" + c.name + "' holds no block");
    Tier t;
    t.config = std::move(c);
    if (t.config.name == "dram") {
      t.layers = host_layers(t.memory, t.config.num_blocks);
    } else if (t.config.name == "ssd") {
      t.file = true;
      const std::filesystem::path dir =
          t.config.dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(t.config.dir);
      std::string pattern = (dir / "twinserve-kv-XXXXXX").string();
      t.fd = ::mkstemp(pattern.data());
      if (t.fd < 0) throw Error("kv tier ssd: cannot create a file in " + dir.string() + ": " + errno_text());
      ::unlink(pattern.c_str());  // anonymous from now on: closing it frees the space
      t.path = pattern;
    } else {
      throw UsageError("kv tier '" + t.config.name + "': the engine keeps tiers named dram (host memory) or ssd (a file)");
    }
    tiers_.push_back(std::move(t));
  }
  bounce_ = host_layers(bounce_memory_, 1);
}

KvTierStore::~KvTierStore() {
  for (const Tier& t : tiers_) {
    if (t.fd >= 0) ::close(t.fd);
  }
}

std::vector<KvCacheView> KvTierStore::host_layers(Buffer& buffer, std::int64_t blocks) {
  const auto per = static_cast<std::size_t>(per_tensor_ * blocks);
  buffer = backend_.allocate(per * 2 * layers_, MemoryKind::host);
  std::vector<KvCacheView> out;
  for (std::size_t l = 0; l < layers_; ++l) {
    KvCacheView v = proto_;
    v.num_blocks = blocks;
    v.k = static_cast<char*>(buffer.data()) + per * 2 * l;
    v.v = static_cast<char*>(buffer.data()) + per * (2 * l + 1);
    out.push_back(v);
  }
  return out;
}

std::vector<KvTierConfig> KvTierStore::core_configs() const {
  std::vector<KvTierConfig> out;
  for (const Tier& t : tiers_) out.push_back({t.config.name, t.config.num_blocks});
  return out;
}

void KvTierStore::ensure_stages(std::int64_t blocks) {
  if (blocks <= stage_blocks_) return;
  sync_if_pending();  // the old staging may still be read by a copy in flight
  stage_blocks_ = std::max(blocks, 2 * stage_blocks_);
  stage_ = host_layers(stage_memory_, stage_blocks_);
}

void KvTierStore::sync_if_pending() {
  if (!pending_) return;
  backend_.synchronize();
  pending_ = false;
}

off_t KvTierStore::file_offset(std::int32_t slot, std::size_t layer, bool value) const {
  const std::int64_t tensor = (static_cast<std::int64_t>(slot) * static_cast<std::int64_t>(layers_) +
                               static_cast<std::int64_t>(layer)) * 2 + (value ? 1 : 0);
  return static_cast<off_t>(tensor * per_tensor_);
}

void KvTierStore::copy_host_block(const KvCacheView& from, std::int64_t from_block, const KvCacheView& to,
                                  std::int64_t to_block) const {
  for (const bool value : {false, true}) {
    std::memcpy(host_block(to, value, to_block), host_block(from, value, from_block), static_cast<std::size_t>(per_tensor_));
  }
}

char* KvTierStore::host_block(const KvCacheView& v, bool value, std::int64_t block) const {
  return static_cast<char*>(value ? v.v : v.k) + block * per_tensor_;
}

void KvTierStore::file_write(const Tier& t, std::int32_t slot, std::size_t l, const KvCacheView& host,
                             std::int64_t block) {
  for (int value = 0; value < 2; ++value) {
    const off_t at = file_offset(slot, l, value != 0);
    const char* p = host_block(host, value != 0, block);
    for (std::int64_t done = 0; done < per_tensor_;) {
      const ssize_t n = ::pwrite(t.fd, p + done, static_cast<std::size_t>(per_tensor_ - done), at + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error("kv tier ssd: writing " + t.path + ": " + errno_text());
      done += n;
    }
  }
}

void KvTierStore::file_read(const Tier& t, std::int32_t slot, std::size_t l, const KvCacheView& host,
                            std::int64_t block) {
  for (int value = 0; value < 2; ++value) {
    const off_t at = file_offset(slot, l, value != 0);
    char* p = host_block(host, value != 0, block);
    for (std::int64_t done = 0; done < per_tensor_;) {
      const ssize_t n = ::pread(t.fd, p + done, static_cast<std::size_t>(per_tensor_ - done), at + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error("kv tier ssd: reading " + t.path + ": " + (n == 0 ? "short file" : errno_text()));
      done += n;
    }
  }
}

void KvTierStore::apply(std::span<const TierCopy> copies, std::span<const KvCacheView> device) {
  if (copies.empty()) return;
  std::int64_t stages = 0;
  for (const TierCopy& c : copies) {
    if (c.kind == TierCopy::Kind::tier_to_stage) stages = std::max<std::int64_t>(stages, c.to + 1);
  }
  ensure_stages(stages);
  const auto tier = [&](std::int32_t i) -> Tier& {
    if (i < 0 || static_cast<std::size_t>(i) >= tiers_.size()) throw Error("kv tiers: a copy names tier " + std::to_string(i));
    return tiers_[static_cast<std::size_t>(i)];
  };
  for (const TierCopy& c : copies) {
    switch (c.kind) {
      case TierCopy::Kind::device_to_tier: {
        Tier& to = tier(c.to_tier);
        for (std::size_t l = 0; l < layers_; ++l) {
          if (to.file) {
            backend_.copy_blocks(device[l], bounce_[l], std::vector<BlockCopy>{{c.from, 0}});
            backend_.synchronize();
            file_write(to, c.to, l, bounce_[l], 0);
          } else {
            backend_.copy_blocks(device[l], to.layers[l], std::vector<BlockCopy>{{c.from, c.to}});
            pending_ = true;
          }
        }
        break;
      }
      case TierCopy::Kind::tier_to_tier: {
        Tier& from = tier(c.from_tier);
        Tier& to = tier(c.to_tier);
        sync_if_pending();  // the source slot may have been written by a device copy this step
        for (std::size_t l = 0; l < layers_; ++l) {
          if (from.file) file_read(from, c.from, l, bounce_[l], 0);
          const KvCacheView& src = from.file ? bounce_[l] : from.layers[l];
          const std::int64_t src_block = from.file ? 0 : c.from;
          if (to.file) {
            file_write(to, c.to, l, src, src_block);
          } else {
            copy_host_block(src, src_block, to.layers[l], c.to);
          }
        }
        break;
      }
      case TierCopy::Kind::tier_to_stage: {
        Tier& from = tier(c.from_tier);
        sync_if_pending();
        for (std::size_t l = 0; l < layers_; ++l) {
          if (from.file) {
            file_read(from, c.from, l, stage_[l], c.to);
          } else {
            copy_host_block(from.layers[l], c.from, stage_[l], c.to);
          }
        }
        break;
      }
      case TierCopy::Kind::stage_to_device:
        for (std::size_t l = 0; l < layers_; ++l) {
          backend_.copy_blocks(stage_[l], device[l], std::vector<BlockCopy>{{c.from, c.to}});
        }
        pending_ = true;
        break;
    }
  }
  // The step reads the loaded blocks on the device's own stream; a staging
  // block is rewritten only after the next step's sync_if_pending.
}

}  // namespace twin
