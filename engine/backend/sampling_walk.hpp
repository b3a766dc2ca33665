#pragma once
// The arithmetic of sample_reference that the CUDA sampling kernels repeat:
// a logit's probability, and the top-k / top-p cut and the draw over a row's
// probabilities once sorted. Scalars and raw pointers only (no std
// containers), so nvcc compiles the same code for the device and the CPU
// tests check it against sample_reference (tests/backend_cuda).
#include <cmath>
#include <cstdint>

#if !defined(TWIN_HOST_DEVICE)
#if defined(__CUDACC__)
#define TWIN_HOST_DEVICE __host__ __device__
#else
#define TWIN_HOST_DEVICE
#endif
#endif

namespace twin::sampling {

// max_logit is the row's largest non-NaN logit (-inf when there is none). A
// row without a finite or +inf maximum has nothing to draw from: it takes
// the greedy argmax, which is id 0 for such rows.
TWIN_HOST_DEVICE inline bool has_max(float max_logit) { return max_logit > -INFINITY; }

// exp((logit - max) / T) in double, inv_t = 1 / double(T), written once
// here so host and device evaluate the same expression in the same order.
// NaN (a NaN logit, or a NaN temperature) becomes 0, so the probabilities
// are totally ordered. A +inf maximum has no finite scale: the +inf logits
// get 1 each and the rest 0.
TWIN_HOST_DEVICE inline double prob(float logit, float max_logit, double inv_t) {
  if (max_logit == INFINITY) return logit == max_logit ? 1.0 : 0.0;
  const double p = exp((static_cast<double>(logit) - static_cast<double>(max_logit)) * inv_t);
  return p == p ? p : 0.0;
}

// The draw over a row's vocab (>= 1) probabilities sorted in
// sample_reference's order (descending, ties by ascending id): keep the first
// top_k (if in (0, vocab)), then the shortest prefix whose mass reaches
// top_p of the kept mass (at least one), then walk u * (kept mass) and take
// the first position whose running sum passes it (the last kept position
// when rounding leaves the draw past the end). Every sum runs sequentially
// in that order, so the double roundings are the reference's.
//
// Written as a resumable walk fed spans of the sorted row, in the order
// next() asks for (three passes from position 0: kept mass, top-p cut,
// draw), so a device block can stage the row through shared memory while
// one thread does the sums; walk() below feeds it the whole row at once.
class Walk {
 public:
  TWIN_HOST_DEVICE Walk(std::int64_t vocab, std::int32_t top_k, float top_p, double u)
      : kept_(top_k > 0 && top_k < vocab ? top_k : vocab), top_p_(top_p), u_(u) {}

  TWIN_HOST_DEVICE bool done() const { return phase_ == kDone; }
  // The position whose probability feed() expects first.
  TWIN_HOST_DEVICE std::int64_t next() const { return pos_; }
  // The drawn position, once done().
  TWIN_HOST_DEVICE std::int64_t result() const { return pos_; }

  // Consumes p[0, count) as the probabilities at next(), next() + 1, ...;
  // stops early when a pass ends (next() may then go back to 0).
  TWIN_HOST_DEVICE void feed(const double* p, std::int64_t count) {
    const std::int64_t base = pos_;
    const std::int64_t end = base + count < kept_ ? base + count : kept_;
    if (phase_ == kMass) {
      for (; pos_ < end; ++pos_) acc_ += p[pos_ - base];
      if (pos_ == kept_) start_cut();
    } else if (phase_ == kCut) {
      bool reached = false;
      while (!reached && pos_ < end) {
        acc_ += p[pos_ - base];
        ++pos_;
        reached = acc_ >= target_;
      }
      if (reached || pos_ == kept_) {
        kept_ = pos_;  // >= 1: the pass adds at least one probability
        start_draw(acc_);
      }
    } else if (phase_ == kDraw) {
      for (; pos_ < end; ++pos_) {
        acc_ += p[pos_ - base];
        if (x_ < acc_) {
          phase_ = kDone;
          return;
        }
      }
      if (pos_ == kept_) {
        pos_ = kept_ - 1;
        phase_ = kDone;
      }
    }
  }

 private:
  static constexpr int kMass = 0, kCut = 1, kDraw = 2, kDone = 3;

  TWIN_HOST_DEVICE void start_cut() {
    if (!(top_p_ < 1.0f)) {
      start_draw(acc_);
      return;
    }
    target_ = static_cast<double>(top_p_) * acc_;
    phase_ = kCut;
    pos_ = 0;
    acc_ = 0.0;
  }
  TWIN_HOST_DEVICE void start_draw(double kept_mass) {
    x_ = u_ * kept_mass;
    phase_ = kDraw;
    pos_ = 0;
    acc_ = 0.0;
  }

  std::int64_t kept_;
  float top_p_;
  double u_;
  int phase_ = kMass;
  std::int64_t pos_ = 0;
  double acc_ = 0.0;
  double target_ = 0.0;
  double x_ = 0.0;
};

// The position in `sorted` (a whole row, as for Walk) of the drawn token.
TWIN_HOST_DEVICE inline std::int64_t walk(const double* sorted, std::int64_t vocab, std::int32_t top_k, float top_p,
                                          double u) {
  Walk w(vocab, top_k, top_p, u);
  while (!w.done()) w.feed(sorted + w.next(), vocab - w.next());
  return w.result();
}

}  // namespace twin::sampling
