// Expert parallelism for MoE models in the simulator (docs/simulate.md,
// "Expert parallelism"): the ops of the busiest EP rank, all-to-all dispatch
// and combine bytes and prices against hand computations, the cost rising
// with expert load imbalance, experts split across ranks in the memory plan,
// and errors naming the key or flag.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/step_ops.hpp"
#include "sim_test_util.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"

using namespace twin;
using namespace twin::test;

namespace {

const Op* find_op(const std::vector<Op>& ops, OpKind kind) {
  for (const auto& op : ops)
    if (op.kind == kind) return &op;
  return nullptr;
}

const OpCost* find_cost(const std::vector<OpCost>& ops, OpKind kind) {
  for (const auto& op : ops)
    if (op.kind == kind) return &op;
  return nullptr;
}

ClusterConfig mixtral(int tp, int ep, double share = 0) {
  ClusterConfig c = one_group("mixtral-8x7b", "h100-80gb", tp, 1, 1);
  c.groups[0].ep = ep;
  c.groups[0].expert_busiest_share = share;
  return c;
}

}  // namespace

TEST_CASE("EP: the busiest rank's ops, and all-to-all bytes by hand", "[sim][ep]") {
  const ModelDesc m = resolve_model("mixtral-8x7b");
  // 63 decodes and a 449-token prompt: 512 tokens, 1,024 routed copies (top-2).
  BatchShape big = decode_batch(63, 1000);
  big.seqs.push_back(SeqShape{449, 0, true});
  std::vector<Op> one, four;
  step_ops(m, big, ParallelLayout{1, 1}, Dtype::bf16, Dtype::bf16, 0, one);
  step_ops(m, big, ParallelLayout{1, 1, 4}, Dtype::bf16, Dtype::bf16, 0, four);
  // Without EP there is no all-to-all.
  CHECK(find_op(one, OpKind::ep_dispatch) == nullptr);
  CHECK(find_op(one, OpKind::moe_gate_up_proj)->m == 1024);
  // Attention data parallel: a rank runs a quarter of the tokens.
  CHECK(find_op(four, OpKind::qkv_proj)->m == 128);
  CHECK(find_op(four, OpKind::moe_router)->m == 128);
  // Uniform routing: a rank's experts (2 of 8) get a quarter of the copies.
  const Op* up = find_op(four, OpKind::moe_gate_up_proj);
  CHECK(up->m == 256);
  CHECK(up->num_seqs == 2);
  // Dispatch: the other ranks' 384 tokens come here when at least one of
  // their two experts is here (1 - (3/4)^2 = 7/16 of them: 168), once per
  // token, each a hidden state of 4,096 bf16 values; combine sends as much
  // back. Once per layer.
  const Op* dispatch = find_op(four, OpKind::ep_dispatch);
  const Op* combine = find_op(four, OpKind::ep_combine);
  REQUIRE(dispatch);
  REQUIRE(combine);
  CHECK(dispatch->comm_bytes == 168.0 * 4096 * 2);
  CHECK(combine->comm_bytes == dispatch->comm_bytes);
  CHECK(dispatch->group == 4);
  CHECK(dispatch->repeat == 32);
  // Dispatch before the experts, combine after them.
  CHECK(dispatch < up);
  CHECK(combine > find_op(four, OpKind::moe_down_proj));
  // Skewed: the busiest rank gets 60% of the 1,024 copies (615 rows, rounded up).
  std::vector<Op> skewed;
  step_ops(m, big, ParallelLayout{1, 1, 4, 0.6}, Dtype::bf16, Dtype::bf16, 0, skewed);
  CHECK(find_op(skewed, OpKind::moe_gate_up_proj)->m == 615);
  // A copy lands on it with probability 0.6: 1 - 0.4^2 = 84% of the 384.
  CHECK(find_op(skewed, OpKind::ep_dispatch)->comm_bytes == Approx(384.0 * 0.84 * 4096 * 2));
  // Under TP 2 within each rank every GPU moves half of the rank's rows.
  std::vector<Op> tp2;
  step_ops(m, big, ParallelLayout{2, 1, 4}, Dtype::bf16, Dtype::bf16, 0, tp2);
  CHECK(find_op(tp2, OpKind::ep_dispatch)->comm_bytes == 168.0 * 4096 * 2 / 2);
}

TEST_CASE("EP: the all-to-all is priced over the topology, and the cost rises with imbalance", "[sim][ep]") {
  Cluster c = build_cluster(mixtral(1, 4));
  std::vector<OpCost> ops;
  price(*c.replicas[0].cost_model, decode_batch(256, 1000), &ops);
  const OpCost* dispatch = find_cost(ops, OpKind::ep_dispatch);
  REQUIRE(dispatch);
  CHECK(dispatch->curve == "link");
  // Four H100s on one NVSwitch: each GPU's exchange drains over its own
  // NVLink (450 GB/s, 94% for collectives); the latency is one GPU-to-GPU
  // path, 37.7 us / 14; plus the 2 us kernel launch.
  // The other ranks' 192 tokens, the 7/16 of them with an expert here: 84 rows.
  const double bytes = 84.0 * 4096 * 2;
  const double each = 37.7e3 / 14 + bytes / (450e9 * 0.94) * 1e9 + 2000;
  CHECK(dispatch->time_ns / dispatch->repeat == Approx(each));
  CHECK(dispatch->comm_bytes == bytes * 32);

  // The step waits for the busiest rank: more skew, more time.
  Time last = 0;
  for (const double share : {0.25, 0.4, 0.6, 1.0}) {
    Cluster skewed = build_cluster(mixtral(1, 4, share));
    const Time t = price(*skewed.replicas[0].cost_model, decode_batch(256, 1000));
    CAPTURE(share, t, last);
    CHECK(t > last);
    last = t;
  }
  // Share 1/ep is uniform routing.
  Cluster uniform = build_cluster(mixtral(1, 4));
  Cluster quarter = build_cluster(mixtral(1, 4, 0.25));
  CHECK(price(*uniform.replicas[0].cost_model, decode_batch(256, 1000)) ==
        price(*quarter.replicas[0].cost_model, decode_batch(256, 1000)));

  // Across nodes (16 GPUs on 8-GPU nodes) half of each GPU's exchange
  // leaves the node over a path the node's eight GPUs share.
  ClusterTopology topology;
  const std::vector<GpuId> gpus = topology.add_nodes(node_links(c.groups[0].hardware), 2);
  const AllToAllCost node = topology.all_to_all(std::vector<GpuId>(gpus.begin(), gpus.begin() + 8));
  const AllToAllCost two = topology.all_to_all(gpus);
  CHECK(node.size == 8);
  CHECK(node.bandwidth == Approx(450e9));
  const PathCost off = topology.path(gpus[0], gpus[8]);
  CHECK(two.bandwidth == Approx(1.0 / std::max(7.0 / 15 / 450e9, 8.0 / 15 * 8 / off.bandwidth)));
  CHECK(two.latency == Approx(off.latency));
  CHECK(two.time(1e6) > node.time(1e6));
}

TEST_CASE("EP: experts are split over the ranks in the memory plan, KV per rank", "[sim][ep]") {
  const ModelDesc m = resolve_model("mixtral-8x7b");
  const WeightPrecision bf16(Dtype::bf16);
  // One expert: gate, up and down projections of 4,096 x 14,336, bf16.
  const std::int64_t expert = 3LL * 4096 * 14336 * 2;
  const std::int64_t whole = weight_bytes_per_gpu(m, bf16, ParallelLayout{1, 1}, 0);
  const std::int64_t ep4 = weight_bytes_per_gpu(m, bf16, ParallelLayout{1, 1, 4}, 0);
  const std::int64_t ep8 = weight_bytes_per_gpu(m, bf16, ParallelLayout{1, 1, 8}, 0);
  CHECK(whole - ep4 == 32 * 6 * expert);  // 6 of 8 experts per layer gone from each GPU
  CHECK(ep4 - ep8 == 32 * 1 * expert);
  // TP inside a rank halves the rest and each expert too.
  const std::int64_t tp2ep4 = weight_bytes_per_gpu(m, bf16, ParallelLayout{2, 1, 4}, 0);
  CHECK(tp2ep4 < ep4);
  CHECK(ep4 - tp2ep4 > 32 * expert);

  // The cluster: four GPUs per replica, and each rank's GPU holds its own
  // sequences' KV, so the replica has four GPUs' worth of blocks.
  Cluster c = build_cluster(mixtral(1, 4));
  CHECK(c.groups[0].replica_gpus.front().size() == 4);
  const MemoryPlan& plan = c.groups[0].memory;
  CHECK(plan.weight_bytes == static_cast<double>(ep4));
  CHECK(plan.attention_ranks == 4);
  CHECK(plan.num_blocks == 4 * static_cast<std::int32_t>(std::floor(plan.kv_bytes / plan.block_bytes)));
  CHECK(explain_memory_plan(plan, "").find("attention ranks") != std::string::npos);
  // Mixtral bf16 does not fit one H100 (93 GB of weights); EP 4 does.
  CHECK_THROWS_WITH(build_cluster(mixtral(1, 1)), Catch::Contains("does not fit"));
}

TEST_CASE("EP: layout and configuration errors name the key", "[sim][ep]") {
  CHECK_THROWS_WITH(check_layout(resolve_model("llama-3.1-8b"), ParallelLayout{1, 1, 2}),
                    Catch::Contains("mixture-of-experts"));
  CHECK_THROWS_WITH(check_layout(resolve_model("mixtral-8x7b"), ParallelLayout{1, 1, 3}),
                    Catch::Contains("ep=3") && Catch::Contains("8 experts"));
  CHECK_THROWS_WITH(check_layout(resolve_model("mixtral-8x7b"), ParallelLayout{1, 1, 4, 0.2}),
                    Catch::Contains("expert_busiest_share"));
  CHECK_NOTHROW(check_layout(resolve_model("mixtral-8x7b"), ParallelLayout{1, 1, 4, 0.25}));

  auto parse = [](const std::string& text) { return parse_cluster_config(nlohmann::json::parse(text), "c.json"); };
  const ClusterConfig ok = parse(R"({"groups": [{"model": "mixtral-8x7b", "ep": 4, "expert_busiest_share": 0.5}]})");
  CHECK(ok.groups[0].ep == 4);
  CHECK(ok.groups[0].expert_busiest_share == 0.5);
  CHECK(cluster_config_json(ok)["groups"][0]["ep"] == 4);
  CHECK_FALSE(cluster_config_json(ClusterConfig{}).dump().find("\"ep\"") != std::string::npos);
  CHECK_THROWS_WITH(parse(R"({"groups": [{"ep": 0}]})"), Catch::Contains("c.json") && Catch::Contains("groups[0].ep"));
  CHECK_THROWS_WITH(parse(R"({"groups": [{"expert_busiest_share": 1.5}]})"),
                    Catch::Contains("groups[0].expert_busiest_share"));
  CHECK_THROWS_WITH(build_cluster(parse(R"({"groups": [{"model": "llama-3.1-8b", "ep": 2}]})")),
                    Catch::Contains("c.json") && Catch::Contains("groups[0]") && Catch::Contains("mixture-of-experts"));
}

TEST_CASE("simulate --ep: --explain-ops shows the all-to-all, a run serves, bad values name the flag",
          "[sim][ep][cli]") {
  if (!std::getenv("TWIN_BIN")) TWIN_SKIP("TWIN_BIN not set (run through ctest)");
  const CliRun ops = run_twinserve("simulate --model mixtral-8x7b --hw h100-80gb --ep 4 --explain-ops 512,64x1024");
  CHECK(ops.exit_code == 0);
  CHECK(ops.out.find("ep=4") != std::string::npos);
  CHECK(ops.out.find("ep_dispatch") != std::string::npos);
  CHECK(ops.out.find("ep_combine") != std::string::npos);
  const CliRun mem = run_twinserve("simulate --model mixtral-8x7b --hw h100-80gb --ep 4 --explain-memory");
  CHECK(mem.exit_code == 0);
  CHECK(mem.out.find("attention ranks") != std::string::npos);
  auto usage = [](const std::string& flags, const std::string& named) {
    const CliRun r = run_twinserve("simulate --model mixtral-8x7b --explain-memory " + flags, true);
    INFO(flags << " -> " << r.out);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find(named) != std::string::npos);
  };
  usage("--ep 0", "--ep");
  usage("--ep 3", "ep=3");
  usage("--ep 4 --expert-busiest-share 2", "--expert-busiest-share");
  usage("--ep 4 --expert-busiest-share 0.1", "expert_busiest_share");
}

TEST_CASE("DeepSeek-V3's shape: 256 routed experts, a shared one, three dense layers", "[sim][ep][deepseek]") {
  const ModelDesc m = resolve_model("deepseek-v3");
  CHECK(m.num_local_experts == 256);  // read from n_routed_experts
  CHECK(m.n_shared_experts == 1);
  CHECK(m.expert_intermediate_size() == 2048);
  CHECK(m.dense_layers() == 3);
  // 671B parameters published (37B active); tests/models/mla_test checks
  // them to the parameter.
  const double total = static_cast<double>(param_count(m)) / 1e9;
  const double active = static_cast<double>(active_param_count(m)) / 1e9;
  INFO("total " << total << "B, active " << active << "B");
  CHECK(std::abs(total - 671) / 671 < 0.01);
  CHECK(std::abs(active - 37) / 37 < 0.10);

  // One decode step: the three dense layers run the dense MLP (18,432 wide),
  // the 58 MoE layers the router, the experts and the shared expert.
  std::vector<Op> ops;
  step_ops(m, decode_batch(64, 1000), ParallelLayout{1, 1, 32}, Dtype::bf16, Dtype::bf16, 0, ops);
  const Op* router = find_op(ops, OpKind::moe_router);
  REQUIRE(router);
  CHECK(router->repeat == 58);
  int dense_mlps = 0, shared_mlps = 0;
  for (const Op& op : ops) {
    if (op.kind != OpKind::gate_up_proj) continue;
    if (op.n == 2 * 18432) dense_mlps += op.repeat;
    if (op.n == 2 * 2048) shared_mlps += op.repeat;
  }
  CHECK(dense_mlps == 3);
  CHECK(shared_mlps == 58);
  // EP 32: 8 experts per rank; 64 tokens x top-8 = 512 copies, 16 per rank.
  const Op* up = find_op(ops, OpKind::moe_gate_up_proj);
  CHECK(up->m == 16);
  CHECK(up->num_seqs == 8);
  // The other ranks' 62 tokens reach this one when one of their eight
  // experts is here: 1 - (31/32)^8 of them, once each.
  CHECK(find_op(ops, OpKind::ep_dispatch)->comm_bytes ==
        Approx(64.0 * 31 / 32 * (1 - std::pow(31.0 / 32, 8)) * 7168 * 2));

  // Memory: at EP 32 one GPU holds 8 of the 256 experts of each MoE layer
  // (and every shared expert and dense layer): it fits an H200 in bf16.
  const WeightPrecision bf16(Dtype::bf16);
  const std::int64_t expert = 3LL * 7168 * 2048 * 2;
  CHECK(weight_bytes_per_gpu(m, bf16, ParallelLayout{1, 1, 16}, 0) -
            weight_bytes_per_gpu(m, bf16, ParallelLayout{1, 1, 32}, 0) ==
        58 * 8 * expert);
  ClusterConfig c = one_group("deepseek-v3", "h200", 1, 1, 1);
  c.groups[0].ep = 32;
  const Cluster cluster = build_cluster(c);
  CHECK(cluster.groups[0].replica_gpus.front().size() == 32);
  CHECK(cluster.groups[0].memory.num_blocks > 0);
  // Dense layers split over PP stages: the first stage holds them.
  CHECK(stage_dense_layers(m, 2, 0) == 3);
  CHECK(stage_dense_layers(m, 2, 1) == 0);

  // The engine refuses what it does not run; bad keys name themselves.
  CHECK_THROWS_WITH(parse_model_json(R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 64, "n_routed_experts": 4,
      "num_experts_per_tok": 2, "first_k_dense_replace": 2})", "m.json", "m"),
                    Catch::Contains("m.json") && Catch::Contains("first_k_dense_replace"));
  // DeepSeek's own config.json names its multi-head latent attention's
  // widths; one missing is refused by name, not priced as something else.
  CHECK_THROWS_WITH(parse_model_json(R"({"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 64,
      "kv_lora_rank": 16})", "config.json", "m"),
                    Catch::Contains("config.json") && Catch::Contains("qk_nope_head_dim"));
}
