#include "tools/twinserve/disagg_flags.hpp"

#include "base/error.hpp"
#include "engine/core/disaggregation.hpp"
#include "engine/core/router.hpp"
#include "sim/kv_transfer.hpp"
#include "tools/twinserve/flag_checks.hpp"

namespace twin::cli {

void add_disagg_flags(CLI::App& sub, DisaggFlags& a) {
  sub.add_option("--prefill-replicas", a.prefill_replicas,
                 "Prefill pool size: split the (single) group into a prefill and a decode pool (docs/disaggregation.md)")
      ->check(int_range(1, 1000000));
  sub.add_option("--decode-replicas", a.decode_replicas, "Decode pool size (with --prefill-replicas)")->check(int_range(1, 1000000));
  sub.add_option("--disagg-mode", a.disagg_mode,
                 "Which requests go through the prefill pool: always (default), never, conditional");
  sub.add_option("--disagg-threshold", a.disagg_threshold,
                 "conditional: disaggregate a prompt with more than this many tokens not cached on its decode replica")
      ->check(int_range(0, kMaxInt32));
  sub.add_option("--kv-transfer", a.kv_transfer, "How KV moves: whole (after the prefill, default) or layerwise (overlapped with it)");
  sub.add_option("--prefill-router", a.prefill_router, "Router of the prefill pool (default: --router)");
  sub.add_option("--decode-router", a.decode_router, "Router of the decode pool (default: --router)");
}

void apply_disagg_flags(const DisaggFlags& a, ClusterConfig& c, bool replicas_given) {
  if (a.prefill_replicas || a.decode_replicas) {
    if (!a.prefill_replicas || !a.decode_replicas) {
      throw UsageError("--prefill-replicas and --decode-replicas go together (each pool needs its size)");
    }
    if (replicas_given) throw UsageError("--replicas and --prefill-replicas/--decode-replicas exclude each other");
    if (c.groups.size() != 1 || c.groups.front().role != "mixed") {
      throw UsageError("--prefill-replicas/--decode-replicas split a single-group cluster; give pools as groups with a role in the cluster config");
    }
    ReplicaGroupConfig prefill = c.groups.front(), decode = c.groups.front();
    prefill.role = "prefill";
    prefill.count = *a.prefill_replicas;
    decode.role = "decode";
    decode.count = *a.decode_replicas;
    c.groups = {prefill, decode};
  }
  const bool pools = has_pools(c);
  auto pool_flag = [&](const char* flag) {
    if (!pools) throw UsageError(std::string(flag) + " needs prefill and decode pools (--prefill-replicas/--decode-replicas, or groups with a role)");
  };
  if (a.disagg_mode) {
    pool_flag("--disagg-mode");
    c.disaggregation.mode = *a.disagg_mode;
    (void)disagg_mode(*a.disagg_mode);
  }
  if (a.disagg_threshold) {
    pool_flag("--disagg-threshold");
    c.disaggregation.conditional_threshold = *a.disagg_threshold;
  }
  if (a.kv_transfer) {
    pool_flag("--kv-transfer");
    c.disaggregation.kv_transfer = *a.kv_transfer;
    (void)kv_transfer_mode(*a.kv_transfer);
  }
  if (a.prefill_router) {
    pool_flag("--prefill-router");
    c.disaggregation.prefill_router = *a.prefill_router;
    (void)router_policy(*a.prefill_router);
  }
  if (a.decode_router) {
    pool_flag("--decode-router");
    c.disaggregation.decode_router = *a.decode_router;
    (void)router_policy(*a.decode_router);
  }
}

}  // namespace twin::cli
