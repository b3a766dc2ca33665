#pragma once
// The flags validate --measured and calibrate --measured share to describe
// the deployment a measured run ran on, applied to a cluster config: each
// group's precision, then the scheduler preset and knobs, the context
// length and the memory plan. A flag overrides a cluster config file's
// per-group value. The model, hardware and layout stay with each command
// (validate may take them from --cluster-config).
#include "sim/cluster_config.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/scheduler_flags.hpp"

namespace CLI {
class App;
}

namespace twin::cli {

void apply_deployment_flags(ClusterConfig& c, const EngineFlags& engine, const SchedulerFlags& sched,
                            const EngineMemoryFlags& memory, const CLI::App& sub);

}  // namespace twin::cli
