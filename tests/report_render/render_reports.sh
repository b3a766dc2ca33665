#!/usr/bin/env bash
# Renders plan.html and validate's report.html in headless Chromium (Debian's
# `chromium`, tools/install-deps) as a user's browser would, and checks what
# it parsed: the charts (every <svg> with its points), the tables, plan's
# `vllm serve` line; each page's SVGs parsed again as strict XML (a malformed
# chart becomes a <parsererror>); and a screenshot that is a PNG with
# something drawn on it. Nothing is timed: each Chromium call returns when
# the page has loaded. Exit 77 (ctest: skipped) without Chromium.
#   render_reports.sh TWINSERVE WITH_VALIDATE(0|1)
set -euo pipefail
bin=$1
with_validate=$2

browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
  echo "chromium is not installed (tools/install-deps installs it): reports not rendered"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Chromium writes its profile and caches under HOME: keep them in here.
export HOME=$work XDG_CONFIG_HOME=$work/config XDG_CACHE_HOME=$work/cache

fail() {
  echo "FAIL: $*"
  if [[ -f $work/chromium.log ]]; then
    echo "--- last lines of Chromium's log"
    tail -n 20 "$work/chromium.log"
  fi
  exit 1
}

# No network, no first-run work, a throwaway profile: the page alone.
chrome() {
  "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --disable-extensions --user-data-dir="$work/profile" "$@" \
    2>>"$work/chromium.log"
}

count() { grep -o -- "$1" "$2" | wc -l; }

# check_page PAGE SVGS NAME STRING...: the DOM Chromium built from PAGE has
# SVGS charts, each with drawn points, and every STRING; its charts parse as
# XML; its screenshot is a non-empty PNG.
check_page() {
  local page=$1 svgs=$2 name=$3
  shift 3
  local dom=$work/$name.dom.html
  chrome --dump-dom "file://$page" >"$dom" || fail "$name: chromium --dump-dom failed"
  [[ -s $dom ]] || fail "$name: chromium dumped an empty DOM"
  local n
  n=$(count '<svg' "$dom")
  [[ $n -eq $svgs ]] || fail "$name: $n <svg> elements in the rendered DOM, expected $svgs"
  n=$(count '</svg>' "$dom")
  [[ $n -eq $svgs ]] || fail "$name: $n </svg> in the rendered DOM, expected $svgs"
  # Each chart holds its data points: the parser kept the SVG's children.
  n=$(awk 'BEGIN { RS = "</svg>" } /<svg/ && /<circle/ { ++k } END { print k + 0 }' "$dom")
  [[ $n -eq $svgs ]] || fail "$name: $n of $svgs charts have points in the rendered DOM"
  for s in "$@"; do
    grep -qF -- "$s" "$dom" || fail "$name: the rendered DOM lacks '$s'"
  done
  # The charts again as strict XML (an .xhtml page): a malformed SVG would
  # show as a <parsererror> instead of the chart.
  local xhtml=$work/$name.svgs.xhtml
  {
    echo '<html xmlns="http://www.w3.org/1999/xhtml"><body>'
    awk '/^<svg /{ on = 1 } on { print } /^<\/svg>/{ on = 0 }' "$page"
    echo '</body></html>'
  } >"$xhtml"
  chrome --dump-dom "file://$xhtml" >"$work/$name.xml.dom" || fail "$name: chromium --dump-dom of the SVGs failed"
  if grep -q parsererror "$work/$name.xml.dom"; then
    fail "$name: the charts are not well-formed XML: $(grep -o 'parsererror.\{0,300\}' "$work/$name.xml.dom" | head -n 1)"
  fi
  n=$(count '<svg' "$work/$name.xml.dom")
  [[ $n -eq $svgs ]] || fail "$name: $n charts parsed as XML, expected $svgs"
  # A screenshot: a PNG with something on it (a blank page compresses to a
  # few kB).
  local png=$work/$name.png
  chrome --screenshot="$png" --window-size=1280,2000 "file://$page" >/dev/null || fail "$name: chromium --screenshot failed"
  [[ -s $png ]] || fail "$name: no screenshot"
  [[ $(head -c 8 "$png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "$name: the screenshot is not a PNG"
  local size
  size=$(stat -c %s "$png")
  [[ $size -gt 30000 ]] || fail "$name: the screenshot is $size bytes: a blank page?"
  echo "$name: rendered, $svgs charts with their points, well-formed SVG, screenshot $size bytes"
}

cd "$work"
"$bin" trace generate --requests 200 --rate 10 --seed 3 plan_trace.jsonl >/dev/null 2>&1
"$bin" plan --trace plan_trace.jsonl --model llama-3.1-8b --hw h100-80gb,a100-80gb --tp 1,2 \
  --slo 'ttft_p90<=1s,tpot_p90<=50ms' --probe-requests 200 --no-plots --quiet --out plan >plan.log 2>&1 ||
  { cat plan.log; fail "twinserve plan failed"; }
# Two latency charts (one per percentile SLO) and the Pareto.
check_page "$work/plan/plan.html" 4 plan.html 'vllm serve meta-llama/Llama-3.1-8B' '<tr class="chosen">' \
  'class="slo"' 'Latency against offered load: ttft_p90' 'Throughput per GPU against speed per user'

if [[ $with_validate == 1 ]]; then
  "$bin" trace generate --requests 60 --rate 50 --prompt uniform:8:48 --output uniform:16:48 --seed 4 val_trace.jsonl \
    >/dev/null 2>&1
  "$bin" calibrate --model tiny --quick --threads 1 --out tiny-profile.json >calibrate.log 2>&1 ||
    { cat calibrate.log; fail "twinserve calibrate failed"; }
  "$bin" validate --trace val_trace.jsonl --model tiny --profile tiny-profile.json --loads 0.3,0.6,0.9 --threads 1 \
    --seed 2 --max-num-batched-tokens 64 --num-gpu-blocks-override 64 --no-plots --quiet --out val >validate.log 2>&1 ||
    { cat validate.log; fail "twinserve validate failed"; }
  # TTFT, TPOT, E2E latency at p50 and p90, output throughput.
  check_page "$work/val/report.html" 7 report.html '<table class="errors">' 'TTFT p90: predicted and measured' \
    'measured (engine)' 'calibrated' 'roofline'
fi
