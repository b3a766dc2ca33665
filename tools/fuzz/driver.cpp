#include "tools/fuzz/driver.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <typeinfo>

#include "base/error.hpp"
#include "tools/fuzz/alloc_guard.hpp"
#include "tools/fuzz/crash_guard.hpp"
#include "tools/fuzz/mutator.hpp"

namespace twin::fuzz {
namespace {

// Every fourth input continues from the previous one (a random walk of
// stacked mutations reaches further from the seeds, for at most kMaxWalk
// steps); the others start again from a seed.
constexpr int kMaxWalk = 8;

class InputStream {
 public:
  InputStream(const FuzzTarget& target, const DriverOptions& options)
      : corpus_(target.seeds()), mutator_(options.seed, target.max_bytes) {
    corpus_.insert(corpus_.end(), options.extra_seeds.begin(), options.extra_seeds.end());
    num_seeds_ = static_cast<std::int64_t>(corpus_.size());
  }
  std::int64_t num_seeds() const { return num_seeds_; }

  // Inputs in order: index 0.. are the seeds, then mutations.
  const std::string& next() {
    if (index_ < num_seeds_) {
      current_ = corpus_[static_cast<std::size_t>(index_++)];
      return current_;
    }
    ++index_;
    if (walk_ == 0 || walk_ >= kMaxWalk || restart()) {
      current_ = mutator_.next(corpus_);
      walk_ = 1;
    } else {
      mutator_.mutate_once(current_, corpus_);
      ++walk_;
    }
    return current_;
  }

 private:
  bool restart() { return (++counter_ % 4) != 0; }

  std::vector<std::string> corpus_;
  Mutator mutator_;
  std::int64_t num_seeds_ = 0;
  std::int64_t index_ = 0;
  std::string current_;
  int walk_ = 0;
  std::uint64_t counter_ = 0;
};

// Entries in /proc/self/fd and lines of /proc/self/maps; -1 without /proc.
std::int64_t count_fds() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/self/fd", ec);
  if (ec) return -1;
  std::int64_t n = 0;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return -1;
    ++n;
  }
  return n;
}

std::int64_t count_mappings() {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return -1;
  std::int64_t n = 0;
  std::string line;
  while (std::getline(maps, line)) ++n;
  return n;
}

void keep(std::vector<Finding>& list, std::size_t max, std::int64_t index, const std::string& message,
          const std::string& input) {
  if (list.size() < max) list.push_back({index, message, input});
}

}  // namespace

Outcome run_one(const FuzzTarget& target, const std::string& input, const Scratch& scratch) {
  Outcome out;
  try {
    target.run(input, scratch);
  } catch (const Error& e) {
    out.verdict = Verdict::refused;
    out.message = e.what();
    out.names_origin = names_origin(target, out.message, scratch);
  } catch (const std::bad_alloc&) {
    out.verdict = Verdict::failed;
    const std::size_t refused = take_refused_allocation();
    out.message = refused ? "std::bad_alloc: one allocation of " + std::to_string(refused) + " bytes"
                          : "std::bad_alloc";
  } catch (const std::exception& e) {
    out.verdict = Verdict::failed;
    out.message = std::string(typeid(e).name()) + ": " + e.what();
  } catch (...) {
    out.verdict = Verdict::failed;
    out.message = "an exception of unknown type";
  }
  return out;
}

std::string input_at(const FuzzTarget& target, const DriverOptions& options, std::int64_t index) {
  InputStream stream(target, options);
  std::string input;
  for (std::int64_t i = 0; i <= index; ++i) input = stream.next();
  return input;
}

bool leaked(const DriverReport& report) {
  return report.fds_gained > 0 || report.mappings_gained > std::max<std::int64_t>(1000, report.inputs / 10);
}

DriverReport run_driver(const FuzzTarget& target, const DriverOptions& options, const Scratch& scratch) {
  DriverReport report;
  InputStream stream(target, options);
  const std::int64_t fds_before = count_fds(), mappings_before = count_mappings();
  const std::int64_t total = stream.num_seeds() + options.iterations;
  for (std::int64_t i = 0; i < total; ++i) {
    const std::string& input = stream.next();
    arm_crash_guard(target.name, options.seed, i, input);
    const Outcome out = run_one(target, input, scratch);
    disarm_crash_guard();
    ++report.inputs;
    const bool seed = i < stream.num_seeds();
    switch (out.verdict) {
      case Verdict::accepted:
        ++report.accepted;
        break;
      case Verdict::refused:
        ++report.refused;
        if (seed) {
          ++report.seeds_refused;
          keep(report.bad_seeds, options.examples, i, out.message, input);
        }
        if (!out.names_origin) {
          ++report.without_origin;
          keep(report.no_origin, options.examples, i, out.message, input);
        }
        if (out.message.size() > kMaxMessageBytes) {
          ++report.long_messages;
          keep(report.too_long, options.examples, i, out.message.substr(0, 300) + "...", input);
        }
        break;
      case Verdict::failed:
        ++report.failed;
        keep(report.failures, options.examples, i, out.message, input);
        break;
    }
  }
  const std::int64_t fds_after = count_fds(), mappings_after = count_mappings();
  if (fds_before >= 0 && fds_after >= 0) report.fds_gained = fds_after - fds_before;
  if (mappings_before >= 0 && mappings_after >= 0) report.mappings_gained = mappings_after - mappings_before;
  return report;
}

}  // namespace twin::fuzz
