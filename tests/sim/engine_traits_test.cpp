// The engines' table (sim/engine_traits.hpp): a row for every preset that
// stands for a serving engine, none for the scheduling-only ones, and the
// facts the pricing modules read from it.
#include <catch2/catch.hpp>

#include <string>

#include "engine/core/replica.hpp"
#include "sim/engine_traits.hpp"

using namespace twin;

TEST_CASE("every engine preset has a row of traits and the scheduling-only presets none") {
  for (const std::string& name : replica_preset_names()) {
    INFO(name);
    const bool engine = name == "vllm" || name == "vllm-v0" || name == "sglang" || name == "trtllm";
    CHECK((engine_traits(name) != nullptr) == engine);
    if (engine) CHECK(engine_traits(name)->preset == name);
  }
  CHECK(engine_traits("no-such-engine") == nullptr);
}

TEST_CASE("the traits say which engine does what") {
  const EngineTraits& vllm = *engine_traits("vllm");
  const EngineTraits& v0 = *engine_traits("vllm-v0");
  const EngineTraits& sglang = *engine_traits("sglang");
  const EngineTraits& trtllm = *engine_traits("trtllm");
  CHECK(sglang.graph_sizes == GraphSizes::sglang);
  CHECK(vllm.graph_sizes == GraphSizes::vllm);
  // Symmetric memory and the one-call mixed attention are vLLM v1's alone.
  CHECK(vllm.symmetric_memory_all_reduce);
  CHECK_FALSE((v0.symmetric_memory_all_reduce || sglang.symmetric_memory_all_reduce || trtllm.symmetric_memory_all_reduce));
  CHECK(vllm.mixed_attention_tile_rows == 64);
  CHECK((v0.mixed_attention_tile_rows + sglang.mixed_attention_tile_rows + trtllm.mixed_attention_tile_rows) == 0);
  // fp8 input quantisation: o_proj alone under vLLM v1's compiler, all four eagerly, none in TensorRT-LLM.
  CHECK(vllm.separate_fp8_input_quant == op_kind_bit(OpKind::o_proj));
  CHECK(v0.separate_fp8_input_quant == sglang.separate_fp8_input_quant);
  CHECK(trtllm.separate_fp8_input_quant == 0);
  // Host work: v0's Python per sequence is the dearest.
  CHECK(v0.host.per_seq_us > trtllm.host.per_seq_us);
  CHECK(trtllm.host.per_seq_us > vllm.host.per_seq_us);
}
