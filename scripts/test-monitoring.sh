#!/usr/bin/env bash
# Monitoring with real parts: `cuframes exporter` beside host-memory
# publishers and subscribers, scraped by a real Prometheus server (Debian's
# prometheus package, installed when missing), and checked with PromQL:
#
# - promtool check metrics passes on the exporter's page;
# - the publish rate, a keeping-up subscriber's lag, the loss of a subscriber
#   that starts late under drop_oldest, and the drop of a stalled subscriber
#   under strict_wait come out as expected;
# - every expression of deploy/grafana/cuframes.json returns data;
# - deploy/prometheus/alerts.yaml: promtool check rules and promtool test
#   rules (alerts-test.yaml), and every rule loads into the server;
# - the GPU machine's check of the exporter (scripts/gpu/exporter_check.py) passes a
#   faithful exporter's pages and fails wrong ones, on fixtures; the GPU run's Python
#   part fails without the staged wheel.
#
# Prints ok/FAILED per check and "Monitoring: N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

passed=0 failed=0 skipped=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAILED: $*"; failed=$((failed + 1)); }
finish() {
    echo "Monitoring: $passed passed, $failed failed, $skipped skipped"
    [ "$failed" -eq 0 ]
    exit
}

# The GPU machine's check of the exporter (scripts/gpu/exporter_check.py, run by
# scripts/gpu/exporter-host.sh) on fixtures, no GPU needed: pages a faithful exporter
# wrote pass; an exporter that lags its subscribers by more than the fixed allowance
# (46 frames: 30 fps, a page every 0.5 s, ring 16), or misreports their losses, copies,
# who wrote them or the frames published, fails, however high its own frame-rate
# estimate (5,000 here; the old allowance grew with it).
fixtures=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-exporter-check.XXXXXX")
python3 - "$fixtures" <<'PY'
import json, os, sys
root = sys.argv[1]
def fixture(name, last=None, published=1200):
    d = f"{root}/{name}"
    os.makedirs(f"{d}/pages")
    for i in range(10):
        at = 120 * (i + 1) - 20  # the last page: 1180 of 1200
        lines = ["cuframes_exporter_scrape_duration_seconds 0.01",
                 f'cuframes_frames_published_total{{key="ex1"}} {min(at, published) if i < 9 else published}',
                 'cuframes_frames_per_second{key="ex1"} 5000']
        for c in (1, 2):
            got = {"received": at, "dropped": 0, "overwritten": 0, "copied": 0, "report": "publisher"}
            if i == 9 and last and last[0] == c:
                got.update(last[1])
            labels = f'key="ex1",subscriber="c{c}",bit="{c}",report="{got["report"]}"'
            lines += [f"cuframes_subscriber_frames_received_total{{{labels}}} {got['received']}",
                      f'cuframes_subscriber_frames_lost_total{{{labels},reason="dropped"}} {got["dropped"]}',
                      f'cuframes_subscriber_frames_lost_total{{{labels},reason="overwritten"}} {got["overwritten"]}',
                      f"cuframes_subscriber_frames_copied_total{{{labels}}} {got['copied']}"]
        open(f"{d}/pages/p{i:05d}.prom", "w").write("\n".join(lines) + "\n")
    for c in (1, 2):
        summary = {"frames": 1200, "dropped": 0, "overwritten": 0, "copied": 0, "mismatched": 0}
        open(f"{d}/sub1-{c}.json", "w").write(json.dumps(summary) + "\n")
fixture("faithful")
fixture("lagging", last=(2, {"received": 1100}))
fixture("losses", last=(1, {"dropped": 3, "overwritten": 2}))
fixture("copies", last=(1, {"copied": 30}))
fixture("label", last=(2, {"report": "v1_peers"}))
fixture("published", published=1300)
PY
check() { python3 scripts/gpu/exporter_check.py "$fixtures/$1" 1 2 1200 30 0.5 16; }
if out=$(check faithful) && grep -q "all agree" <<<"$out"; then
    ok "exporter_check.py: a faithful exporter's pages agree (1180 of 1200 at the last page, within 46)"
else
    bad "exporter_check.py on a faithful exporter's pages: $out"
fi
for case in "lagging:FAILED ex1 c2.*received 1100" "losses:FAILED ex1 c1.*lost 5" "copies:FAILED ex1 c1.*copied 30" \
    "label:FAILED ex1 c2.*report v1_peers" "published:FAILED ex1: the exporter saw 1300"; do
    name=${case%%:*}
    if out=$(check "$name"); then
        bad "exporter_check.py passed the '$name' fixture: $out"
    elif grep -q "${case#*:}" <<<"$out"; then
        ok "exporter_check.py fails the '$name' fixture, naming it"
    else
        bad "exporter_check.py failed the '$name' fixture without saying why: $out"
    fi
done
rm -rf "$fixtures"

# The GPU run's Python part (scripts/gpu-test.sh run python) needs the wheel `stage`
# builds, the one users install: with none staged, or two, it fails and says so
# (it used to fall back to the plain library and test what users do not install).
# Run here from a copy of the scripts (no .gpu/ beside them), with a stand-in nvidia-smi.
harness=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-gpu-harness.XXXXXX")
mkdir -p "$harness/bin" "$harness/tree/scripts" "$harness/out"
cp -r scripts/gpu-test.sh scripts/lib scripts/gpu "$harness/tree/scripts/"
printf '#!/bin/sh\nexit 0\n' >"$harness/bin/nvidia-smi"
chmod +x "$harness/bin/nvidia-smi"
gpu_python() { OUT=$harness/out PATH=$harness/bin:$PATH "$harness/tree/scripts/gpu-test.sh" run python 2>&1; }
if out=$(gpu_python); then
    bad "gpu-test.sh run python passed with no wheel staged: $out"
elif grep -q "Python CUDA tests: FAILED (0 wheels in .gpu/wheel, expected one" <<<"$out"; then
    ok "gpu-test.sh run python fails with no wheel staged, saying so"
else
    bad "gpu-test.sh run python with no wheel staged failed without saying why: $out"
fi
mkdir -p "$harness/tree/.gpu/wheel"
touch "$harness/tree/.gpu/wheel/cuframes-0.1-py3-none-any.whl" "$harness/tree/.gpu/wheel/cuframes-0.2-py3-none-any.whl"
if out=$(gpu_python); then
    bad "gpu-test.sh run python passed with two wheels staged: $out"
elif grep -q "FAILED (2 wheels in .gpu/wheel" <<<"$out"; then
    ok "gpu-test.sh run python fails with two wheels staged, saying so"
else
    bad "gpu-test.sh run python with two wheels staged failed without saying why: $out"
fi
rm -rf "$harness"

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "== apt-get install prometheus"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null ||
            { bad "installing Debian's prometheus package"; finish; }
    else
        echo "skipped: no prometheus/promtool here and no apt-get as root to install them"
        skipped=1
        finish
    fi
fi
cargo build -q --locked -p cuframes-cli || { bad "building cuframes"; finish; }
cuframes=$PWD/target/debug/cuframes

work=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-monitoring.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
export CUFRAMES_RUNTIME_DIR=$work/rt
mkdir -p "$CUFRAMES_RUNTIME_DIR"
tag=m$$
bg() { "$@" >"$work/$(basename "$1").$RANDOM.log" 2>&1 & pids+=($!); }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The streams: a steady one, one a late subscriber loses frames on, one
# whose subscriber holds more than the ring and is dropped.
bg "$cuframes" publish "$tag-fast" --memory host --size 64x48 --fps 100 --frames 0
bg "$cuframes" publish "$tag-lossy" --memory host --size 64x48 --fps 200 --frames 0 --ring 4 --policy drop-oldest
bg "$cuframes" publish "$tag-strict" --memory host --size 64x48 --fps 100 --frames 0 --ring 2 \
    --policy strict-wait --ack-timeout 300ms --startup-timeout 300ms
sleep 0.5
bg "$cuframes" subscribe "$tag-fast" --frames 0 --name keeper --wait-timeout 5s
bg "$cuframes" subscribe "$tag-lossy" --frames 0 --name late --start-delay 2s --wait-timeout 5s
bg "$cuframes" subscribe "$tag-strict" --frames 0 --name stalled --hold 4 --copy never --read-ahead 0 --wait-timeout 5s

exporter_port=$(free_port)
bg "$cuframes" exporter --listen "127.0.0.1:$exporter_port"
prom_port=$(free_port)
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $PWD/deploy/prometheus/alerts.yaml
scrape_configs:
  - job_name: cuframes
    static_configs:
      - targets: ["127.0.0.1:$exporter_port"]
EOF
bg prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port"

# The exporter's page, as promtool lints it.
sleep 3
page=$work/metrics.prom
if python3 - "$exporter_port" "$page" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10) as r:
    open(sys.argv[2], "wb").write(r.read())
PY
then
    if promtool check metrics <"$page"; then ok "promtool check metrics"; else bad "promtool check metrics"; fi
else
    bad "GET /metrics from the exporter"
fi
if promtool check rules deploy/prometheus/alerts.yaml >/dev/null; then ok "promtool check rules"; else bad "promtool check rules"; fi
if (cd deploy/prometheus && promtool test rules alerts-test.yaml >/dev/null); then
    ok "promtool test rules (every alert fires on its fixture)"
else
    bad "promtool test rules"
fi

# Let Prometheus gather a dozen seconds, then ask it.
sleep 12
python3 - "$prom_port" "$tag" deploy/grafana/cuframes.json >"$work/queries.log" 2>&1 <<'PY'
import json, sys, urllib.parse, urllib.request
port, tag, dashboard = sys.argv[1], sys.argv[2], sys.argv[3]
def query(expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]
def scalar(expr):
    result = query(expr)
    return float(result[0]["value"][1]) if result else None
checks = [
    ("publish rate of a 100 fps stream, rate() over 10 s", f'rate(cuframes_frames_published_total{{key="{tag}-fast"}}[10s])', lambda v: v is not None and 60 <= v <= 140),
    ("the ring's own frame rate", f'cuframes_frames_per_second{{key="{tag}-fast"}}', lambda v: v is not None and 60 <= v <= 140),
    ("a keeping-up subscriber's lag", f'max_over_time(cuframes_subscriber_lag_frames{{key="{tag}-fast",subscriber="keeper"}}[5s])', lambda v: v is not None and v <= 8),
    ("a late subscriber's loss under drop_oldest (about 2 s at 200 fps)", f'sum(cuframes_subscriber_frames_lost_total{{key="{tag}-lossy",subscriber="late"}})', lambda v: v is not None and v >= 150),
    ("the stalled subscriber dropped under strict_wait", f'max(cuframes_subscribers_dropped_total{{key="{tag}-strict",reason="ack_timeout"}})', lambda v: v is not None and v >= 1),
    ("strict_wait's waits counted", f'max(cuframes_slot_waits_total{{key="{tag}-strict"}})', lambda v: v is not None and v >= 1),
    ("publishers up", f'count(cuframes_publisher_up{{key=~"{tag}-.*"}} == 1)', lambda v: v == 3),
]
failed = 0
for what, expr, good in checks:
    v = scalar(expr)
    if good(v):
        print(f"ok: {what}: {v}")
    else:
        print(f"FAILED: {what}: {expr} = {v}")
        failed += 1
exprs = [t["expr"] for p in json.load(open(dashboard))["panels"] for t in p["targets"]]
for expr in exprs:
    live = expr.replace('"$key"', '".*"')
    if query(live):
        print(f"ok: dashboard expression returns data: {expr}")
    else:
        print(f"FAILED: dashboard expression returns nothing: {expr}")
        failed += 1
with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/rules", timeout=10) as r:
    rules = [rule for g in json.load(r)["data"]["groups"] for rule in g["rules"]]
bad_rules = [r["name"] for r in rules if r.get("health") not in ("ok", "unknown")]
if len(rules) == 7 and not bad_rules:
    print(f"ok: the server loads the {len(rules)} alert rules")
else:
    print(f"FAILED: alert rules loaded: {len(rules)}, unhealthy: {bad_rules}")
    failed += 1
sys.exit(1 if failed else 0)
PY
status=$?
cat "$work/queries.log"
passed=$((passed + $(grep -c '^ok: ' "$work/queries.log")))
failed=$((failed + $(grep -c '^FAILED: ' "$work/queries.log")))
if [ "$status" -ne 0 ] && ! grep -q '^FAILED: ' "$work/queries.log"; then
    bad "the PromQL checks did not run to the end"
fi
finish
