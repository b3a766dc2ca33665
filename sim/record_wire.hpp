#pragma once
// The byte form of what a windowed run's ranks exchange at a refresh
// (sim/rank_group.hpp): plain values copied as they lie in memory (the ranks
// run the same binary on the same kind of machine), strings and vectors
// after their length. Reading past the end is a twin::Error.
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/core/records.hpp"

namespace twin {

class WireWriter {
 public:
  template <class T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  template <class T>
  void put_vector(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<std::uint64_t>(values.size());
    bytes_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }
  void put_string(const std::string& text) {
    put<std::uint64_t>(text.size());
    bytes_ += text;
  }
  void put_record(const RequestRecord& r);
  void put_record(const StepRecord& s);
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class WireReader {
 public:
  explicit WireReader(const std::string& bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof value);
    pos_ += sizeof value;
    return value;
  }
  template <class T>
  void get_vector(std::vector<T>& out) {
    const auto n = get<std::uint64_t>();
    need(n * sizeof(T));
    out.resize(n);
    if (n > 0) std::memcpy(out.data(), bytes_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
  }
  std::string get_string();
  void get_record(RequestRecord& r);
  void get_record(StepRecord& s);
  bool done() const { return pos_ == bytes_.size(); }

 private:
  void need(std::uint64_t n) const;
  const std::string& bytes_;
  std::size_t pos_ = 0;
};

}  // namespace twin
