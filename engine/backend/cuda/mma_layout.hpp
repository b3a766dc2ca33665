#pragma once
// Register-fragment layouts of the tensor-core instructions the prefill
// attention kernel uses (cuda_attention_mma.cu): mma.sync m16n8k16 with bf16
// inputs and f32 accumulators, and ldmatrix m8n8 .x4 (optionally .trans).
// Two kinds of functions:
//   - spec_*: what the hardware does, transcribed from the PTX ISA ("Matrix
//     Fragments for mma.m16n8k16", "ldmatrix"). The kernel never calls them
//     (the hardware is the implementation); the host tests use them to model
//     a warp (tests/backend_cuda/test_attention_mma_host.cpp).
//   - the rest: the kernel's own choices (which row address a lane hands
//     ldmatrix, which accumulator becomes which P operand, which (row, col) an
//     accumulator holds). The kernel calls these, and the host model checks
//     that, composed with the spec, they compute Q·Kᵀ and P·V exactly.
// Plain integer functions, host and device, as in paged_index.hpp.
#include "engine/backend/paged_index.hpp"  // TWIN_HOST_DEVICE

namespace twin::mma {

struct RowCol {
  int row = 0;
  int col = 0;
};

// ---- The hardware (PTX ISA), for the host model -------------------------

// A (16 x 16, row-major): register reg (0..3) of `lane` holds two bf16, the
// lower 16 bits being half 0. groupID = lane / 4, threadID_in_group = lane % 4.
TWIN_HOST_DEVICE constexpr RowCol spec_a(int lane, int reg, int half) {
  return {lane / 4 + 8 * (reg & 1), (lane % 4) * 2 + half + 8 * (reg >> 1)};
}

// B (16 x 8, k x n): register reg (0..1), half h -> (k, n).
TWIN_HOST_DEVICE constexpr RowCol spec_b(int lane, int reg, int half) {
  return {(lane % 4) * 2 + half + 8 * reg, lane / 4};
}

// C / D (16 x 8, f32): element i (0..3) of `lane`.
TWIN_HOST_DEVICE constexpr RowCol spec_c(int lane, int i) { return {lane / 4 + 8 * (i / 2), (lane % 4) * 2 + (i & 1)}; }

// ldmatrix .x4: lanes 8j .. 8j + 7 give the addresses of rows 0..7 of matrix
// j; register j of every lane receives matrix j. Without .trans a lane gets
// (row lane / 4, cols 2 (lane % 4), +1) of the matrix as stored; with .trans
// it gets (rows 2 (lane % 4), +1; col lane / 4). Half h of the register is the
// +h element. Returns the (row, col) within the 8 x 8 matrix.
TWIN_HOST_DEVICE constexpr RowCol spec_ldmatrix(int lane, int half, bool trans) {
  return trans ? RowCol{(lane % 4) * 2 + half, lane / 4} : RowCol{lane / 4, (lane % 4) * 2 + half};
}
TWIN_HOST_DEVICE constexpr int spec_ldmatrix_matrix_of_address_lane(int lane) { return lane / 8; }
TWIN_HOST_DEVICE constexpr int spec_ldmatrix_row_of_address_lane(int lane) { return lane % 8; }

// ---- The kernel's choices ------------------------------------------------

// The row (of shared memory, relative to a 16 x 16 block's corner) and
// column whose address `lane` gives ldmatrix .x4 to load the A operand of a
// 16 x 16 row-major block: matrices 0..3 = (rows 0-7, cols 0-7), (rows 8-15,
// cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15), i.e. A registers
// 0..3. The same addresses, with .trans, load the B operands of two n-tiles
// of a [k][n] row-major block (V stored [key][dim]): registers 0, 1 are B
// registers 0, 1 of columns 0-7, registers 2, 3 those of columns 8-15.
TWIN_HOST_DEVICE constexpr RowCol ldsm_a_address(int lane) { return {lane % 8 + 8 * ((lane / 8) % 2), 8 * (lane / 16)}; }
TWIN_HOST_DEVICE constexpr RowCol ldsm_bt_address(int lane) { return ldsm_a_address(lane); }

// Row and column whose address `lane` gives ldmatrix .x4 (no .trans) to load
// the B operands of two n-tiles from an [n][k] row-major block (K stored
// [key][dim]: n = key, k = dim): registers 0, 1 are B registers 0, 1 of
// n-tile 0 (rows 0-7), registers 2, 3 those of n-tile 1 (rows 8-15).
TWIN_HOST_DEVICE constexpr RowCol ldsm_b_address(int lane) { return {lane % 8 + 8 * (lane / 16), 8 * ((lane / 8) % 2)}; }

// The accumulator (n-tile, element) that becomes half `half` of A register
// `reg` of the 16-key step `step` of P·V: the S tile's accumulators, 8 keys
// per n-tile, are already laid out as A fragments (FlashAttention-2's reuse
// of registers, no trip through shared memory).
struct AccIndex {
  int ntile = 0;
  int elem = 0;
};
TWIN_HOST_DEVICE constexpr AccIndex p_operand(int step, int reg, int half) {
  return {2 * step + (reg >> 1), 2 * (reg & 1) + half};
}

// The (row, col) accumulator element i of `lane` holds: the kernel masks
// and stores through this (equal to spec_c; named for the kernel's use).
TWIN_HOST_DEVICE constexpr RowCol acc_element(int lane, int i) { return spec_c(lane, i); }

}  // namespace twin::mma
