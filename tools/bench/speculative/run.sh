#!/usr/bin/env bash
# make bench-spec: speculative decoding on the CPU engine against the
# simulator's prediction from the acceptance the engine measured
# (docs/speculative.md, "CPU figure"). Timing only: no test depends on it.
#   tools/bench/speculative/run.sh [build dir] [draft method: draft|ngram|self]
# The target is `small` (random weights, seed 0); the draft is its first two
# layers (the same seed gives the same embeddings and layers: a layer-skip
# self-draft, sharing small's 32000-token vocabulary); `self` drafts with
# small itself (same seed, same weights: every proposal is accepted, so the
# figure checks the pricing of k draft passes and a (k + 1)-token
# verification against the engine's). Requests run one at a
# time (max_num_seqs 1): batch 1, as the published speedups are.
# The simulator prices the steps with the cpu roofline profile, or with
# calibrated profiles when PROFILE (small's) and DRAFT_PROFILE (the draft's)
# name them (`twinserve calibrate --model small` and
# `--model tools/bench/speculative/small-draft-2l.json`).
set -euo pipefail
build=${1:-build}
method=${2:-draft}
here=$(cd "$(dirname "$0")" && pwd)
twin="$build/tools/twinserve"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
k=3
threads=${THREADS:-2}
python3 - "$out/trace.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(6):
        f.write(json.dumps({"id": i, "arrival_s": 0.0, "prompt_len": 48, "output_len": 96}) + "\n")
PY
if [ "$method" = ngram ]; then
  spec="{\"method\":\"ngram\",\"num_speculative_tokens\":$k,\"prompt_lookup_max\":3}"
elif [ "$method" = self ]; then
  spec="{\"method\":\"draft_model\",\"model\":\"small\",\"num_speculative_tokens\":$k}"
else
  spec="{\"method\":\"draft_model\",\"model\":\"$here/small-draft-2l.json\",\"num_speculative_tokens\":$k}"
fi
common=(--model small --trace "$out/trace.jsonl" --max-num-seqs 1 --max-model-len 512)
"$twin" run "${common[@]}" --asap --threads "$threads" --out "$out/plain" >/dev/null
"$twin" run "${common[@]}" --asap --threads "$threads" --out "$out/spec" --speculative-config "$spec" >/dev/null
sim_spec=${spec%\}},\"acceptance_from\":\"$out/spec/steps.csv\"}
cost=(--hw cpu)
pricing="cpu roofline"
if [ -n "${PROFILE:-}" ]; then
  cost+=(--profile "$PROFILE")
  pricing="calibrated profiles"
  if [ "$method" != ngram ]; then
    sim_spec=${sim_spec%\}},\"draft_profile\":\"${DRAFT_PROFILE:?set DRAFT_PROFILE to the draft profile}\"}
  fi
fi
"$twin" simulate "${common[@]}" "${cost[@]}" --out "$out/sim-plain" --no-progress >/dev/null
"$twin" simulate "${common[@]}" "${cost[@]}" --out "$out/sim-spec" --no-progress --speculative-config "$sim_spec" >/dev/null
python3 - "$out" "$pricing" <<'PY'
import json, sys
d, pricing = sys.argv[1], sys.argv[2]
def s(name): return json.load(open(f"{d}/{name}/summary.json"))
plain, spec, sp, ss = s("plain"), s("spec"), s("sim-plain"), s("sim-spec")
m = spec["speculative"]
measured = spec["output_throughput"] / plain["output_throughput"]
predicted = ss["output_throughput"] / sp["output_throughput"]
print(f"acceptance rate {m['acceptance_rate']:.3f}, tokens per target step {m['tokens_per_step']:.3f}")
print(f"engine: {plain['output_throughput']:.1f} -> {spec['output_throughput']:.1f} tok/s, speedup {measured:.3f}")
print(f"simulator ({pricing}, measured acceptance): speedup {predicted:.3f}")
print(f"prediction error {100 * (predicted / measured - 1):+.1f}%")
PY
