#include "tools/fuzz/alloc_guard.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace twin::fuzz {
namespace {

std::atomic<std::size_t> cap{0};
std::atomic<std::size_t> refused{0};

void* allocate(std::size_t bytes) {
  const std::size_t limit = cap.load(std::memory_order_relaxed);
  if (limit != 0 && bytes > limit) {
    refused.store(bytes, std::memory_order_relaxed);
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}

void* allocate_nothrow(std::size_t bytes) noexcept {
  try {
    return allocate(bytes);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

}  // namespace

void set_allocation_cap(std::size_t bytes) { cap.store(bytes); }
std::size_t take_refused_allocation() { return refused.exchange(0); }

}  // namespace twin::fuzz

// The plain forms only; the aligned ones keep the library's (aligned_alloc
// and free), which never meet these. Deletes free what malloc gave, so a
// sanitizer sees matching pairs.
void* operator new(std::size_t bytes) { return twin::fuzz::allocate(bytes); }
void* operator new[](std::size_t bytes) { return twin::fuzz::allocate(bytes); }
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept { return twin::fuzz::allocate_nothrow(bytes); }
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept { return twin::fuzz::allocate_nothrow(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
