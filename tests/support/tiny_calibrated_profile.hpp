#pragma once
// A calibrated profile of `tiny` whose every table value is a made-up
// machine's time (fake_time), so tests price steps with the calibrated cost
// model, or fit one, without timing anything.
#include <catch2/catch.hpp>

#include <vector>

#include "hwprofiles/calibrated_profile.hpp"
#include "models/model_desc.hpp"
#include "models/step_ops.hpp"

namespace twin::test {

// A synthetic time: launch + the roofline of a made-up machine, so tests know
// every table value without timing anything.
inline double fake_time(const Op& op) { return 1000.0 + op.flops / 50.0 + op.bytes / 10.0; }

inline Op op_of(const ModelDesc& m, const BatchShape& b, OpKind kind) {
  std::vector<Op> ops;
  step_ops(m, b, ParallelLayout{}, Dtype::fp32, Dtype::fp32, 0, ops);
  for (Op& op : ops) {
    // A one-token chunk after a context: the prefill table's first row.
    if (op.kind == OpKind::attn_decode && kind == OpKind::attn_prefill && op.num_seqs == 1) op.kind = kind;
    if (op.kind == kind) return op;
  }
  FAIL("no op " << op_name(kind));
  return {};
}

inline BatchShape seqs(int count, int tokens, int context, bool samples) {
  BatchShape b;
  b.seqs.assign(count, SeqShape{tokens, context, samples});
  return b;
}

inline CalibratedPoint pt(double x, const Op& op) { return {x, fake_time(op), fake_time(op) * 0.9, fake_time(op) * 1.1, op.flops, op.bytes}; }

// Tables for tiny over tokens 1..64, seqs 1..16, prefill 1..64 x context
// 0..256, decode 1..16 x context 16..256.
inline CalibratedProfile tiny_profile() {
  const ModelDesc m = resolve_model("tiny");
  CalibratedProfile p;
  p.metadata.model = "tiny";
  p.metadata.dtype = "fp32";
  p.metadata.kv_dtype = "fp32";
  p.metadata.backend = "cpu";
  p.metadata.device = "cpu (2 threads)";
  p.metadata.cpu_model = "test";
  p.metadata.hostname = "test";
  p.metadata.date = "2025-01-01T00:00:00Z";
  p.metadata.git_commit = "unknown";
  p.metadata.twinserve_version = "0.1";
  p.metadata.threads = 2;
  p.metadata.max_tokens = 64;
  p.metadata.repeats = 3;
  p.overhead.base_ns = 5000;
  p.overhead.per_seq_ns = 100;
  p.overhead.samples.push_back({"decode x1 decode", 1, 1, 9000, 4000});
  const int tokens[] = {1, 2, 4, 8, 16, 32, 64};
  for (OpKind k : {OpKind::embed, OpKind::rmsnorm, OpKind::qkv_proj, OpKind::rotary, OpKind::o_proj,
                   OpKind::gate_up_proj, OpKind::silu_mul, OpKind::down_proj, OpKind::final_norm}) {
    CurveTable t;
    t.op = k;
    for (int x : tokens) {
      const Op op = op_of(m, seqs(1, x, 0, false), k);
      t.n = op.n;
      t.k = table_kind(k) == TableKind::gemm ? op.k : 0;
      t.points.push_back(pt(x, op));
    }
    (table_kind(k) == TableKind::gemm ? p.gemm : p.elementwise).push_back(t);
  }
  for (OpKind k : {OpKind::lm_head, OpKind::sample}) {
    CurveTable t;
    t.op = k;
    for (int x : {1, 2, 4, 8, 16}) {
      const Op op = op_of(m, seqs(x, 1, 0, true), k);
      t.n = op.n;
      t.k = table_kind(k) == TableKind::gemm ? op.k : 0;
      t.points.push_back(pt(x, op));
    }
    (table_kind(k) == TableKind::gemm ? p.gemm : p.elementwise).push_back(t);
  }
  GridTable pre;
  pre.op = OpKind::attn_prefill;
  for (int n : {1, 4, 16, 64}) {
    GridRow row;
    row.key = n;
    for (int c : {0, 16, 64, 256}) {
      const Op op = op_of(m, seqs(1, n, c, false), OpKind::attn_prefill);
      pre.heads = op.n;
      pre.head_dim = op.k;
      row.points.push_back(pt(c, op));
    }
    pre.rows.push_back(row);
  }
  GridTable dec;
  dec.op = OpKind::attn_decode;
  for (int b : {1, 4, 16}) {
    GridRow row;
    row.key = b;
    for (int c : {16, 64, 256}) {
      const Op op = op_of(m, seqs(b, 1, c, false), OpKind::attn_decode);
      dec.heads = op.n;
      dec.head_dim = op.k;
      row.points.push_back(pt(c, op));
    }
    dec.rows.push_back(row);
  }
  p.attention = {pre, dec};
  return p;
}

}  // namespace twin::test
