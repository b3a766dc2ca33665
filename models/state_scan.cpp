#include "models/state_scan.hpp"

namespace twin {

namespace {
constexpr double kDecodeFlopsPerStateValue = 6;  // decay, rank-one update, delta correction, readout
constexpr double kChunkStateBytes = 4;           // fp32 chunk states of the chunked scans
}  // namespace

Op state_scan_op(const MixerShape& s, int64_t seqs, int64_t tokens, bool prefill, double act, double state_bytes,
                 int64_t repeat) {
  const double T = static_cast<double>(tokens), S = static_cast<double>(seqs);
  const double heads = static_cast<double>(s.heads), rows = static_cast<double>(s.state_rows),
               cols = static_cast<double>(s.state_cols);
  const double state = static_cast<double>(s.state_elems()), conv_state = static_cast<double>(s.conv_state_elems());
  const double conv_flops = T * 2.0 * static_cast<double>(s.conv_dim * s.conv_kernel);
  // Inputs (the convolution's channels and the gates, about the in-projection's
  // width) read, the output written.
  const double io_bytes = T * (static_cast<double>(s.in_n) + static_cast<double>(s.out_k)) * act;
  const double carry_bytes = S * 2.0 * (state + conv_state) * state_bytes;  // each request's state in and out
  Op op;
  op.kind = OpKind::state_scan;
  op.m = prefill ? s.chunk : 1;
  op.n = s.heads;
  op.k = s.state_rows * s.state_cols;
  op.num_seqs = seqs;
  op.tokens = tokens;
  op.context = 0;  // no per-token cache is read
  op.repeat = static_cast<int32_t>(repeat);
  if (!prefill) {
    op.flops = conv_flops + T * kDecodeFlopsPerStateValue * state;
    op.bytes = carry_bytes + io_bytes;
    return op;
  }
  const double chunk = static_cast<double>(s.chunk);
  const double chunks = S + static_cast<double>(tokens / s.chunk);
  op.flops = conv_flops + T * heads * (2.0 * chunk * (rows + cols) + kDecodeFlopsPerStateValue * rows * cols);
  op.bytes = carry_bytes + io_bytes + chunks * state * 2.0 * kChunkStateBytes;
  return op;
}

}  // namespace twin
