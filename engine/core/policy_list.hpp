// The registered policies: one line each, in the order help texts list
// them (docs/policies.md). A line names the policy's factory function,
// defined in the policy's own file, its name as configurations spell it
// (--set order=NAME, --router NAME, ...) and a one-line help.
//
// No include guard: policy_registry.cpp includes this file with
// TWIN_POLICY(Kind, factory, name, help) defined, once to declare the
// factories and once to register them in the registry of their kind.

// Queue orders (SchedulerConfig::order): the waiting queue's service order.
TWIN_POLICY(QueueOrder, make_fcfs_order, "fcfs", "first come, first served")
TWIN_POLICY(QueueOrder, make_priority_order, "priority", "the trace's priority, lower first, then arrival")
TWIN_POLICY(QueueOrder, make_shortest_prompt_order, "shortest_prompt", "shortest prompt first")
TWIN_POLICY(QueueOrder, make_longest_prefix_order, "longest_prefix", "longest cached prefix first (SGLang's LPM)")
TWIN_POLICY(QueueOrder, make_length_buckets_order, "length_buckets", "prompt-length buckets served in turn")
TWIN_POLICY(QueueOrder, make_shortest_remaining_order, "shortest_remaining", "fewest output tokens left first (an oracle: reads the trace)")

// Admission reserves (SchedulerConfig::admission_reserve).
TWIN_POLICY(Admission, make_chunk_admission, "chunk", "admit when this step's chunk fits")
TWIN_POLICY(Admission, make_prompt_admission, "prompt", "admit when the whole prompt fits (vLLM's scheduler_reserve_full_isl)")
TWIN_POLICY(Admission, make_sequence_admission, "sequence", "admit when prompt and every output fit (TensorRT-LLM's no-evict)")
TWIN_POLICY(Admission, make_sglang_admission, "sglang", "prompt and outputs fit beside the running requests' expected outputs (SGLang's new_token_ratio)")

// Preemption victims (SchedulerConfig::victim).
TWIN_POLICY(Victim, make_newest_victim, "newest", "the latest admitted (vLLM's fcfs)")
TWIN_POLICY(Victim, make_oldest_victim, "oldest", "the earliest admitted")
TWIN_POLICY(Victim, make_lowest_priority_victim, "lowest_priority", "the largest priority value, ties to the newest (vLLM's priority)")

// Batch formation (SchedulerConfig::batching).
TWIN_POLICY(Batch, make_continuous_batching, "continuous", "requests join and leave every step (ORCA, vLLM)")
TWIN_POLICY(Batch, make_static_batching, "static", "a batch of batch_size runs until all finish")
TWIN_POLICY(Batch, make_dynamic_batching, "dynamic", "wait for batch_size requests or batch_timeout, run to completion")

// Routers (--router): pick a replica for an arriving request.
TWIN_POLICY(Routing, make_round_robin_router, "round_robin", "replicas in turn")
TWIN_POLICY(Routing, make_least_outstanding_router, "least_outstanding", "fewest admitted, unfinished requests")
TWIN_POLICY(Routing, make_least_kv_router, "least_kv", "lowest KV usage")
TWIN_POLICY(Routing, make_prefix_affinity_router, "prefix_affinity", "longest cached prefix, ties to the least loaded")
TWIN_POLICY(Routing, make_power_of_two_router, "power_of_two", "two random candidates, the less loaded wins")
TWIN_POLICY(Routing, make_dp_balance_router, "dp_balance", "vLLM's DP coordinator: least waiting x 4 + running")
