#!/usr/bin/env python3
"""A subscriber joining a live stream against a decoder starting on it (issue 27).

In one start of publishers and subscribers together, a subscriber's first frame
cannot come before its publisher's, and the publisher is a decoder
(docs/benchmarks.md). Where the stream is already live, it can. This measures
that case: N publishers start first and publish as streams do live (-re,
drop_oldest, no subscriber awaited); once every one of them has published for
--after seconds, N*K subscribers and N*K decoders of the same clip start at the
same moment, interleaved. Each process's exec -> first output (its -progress)
is reported by role, and the subscribers' median over the decoders', with the
subscribers that had to connect a second time. --calls adds the CUDA call
tracer's phases (scripts/lib/bench_host.py).

  scripts/gpu/join-live.py --ffmpeg FFMPEG --clip CLIP --streams 16 --consumers 2 --out DIR
  scripts/gpu/join-live.py --memory host ...   (CPU decode, host memory: anywhere)

Results: DIR/join.jsonl (one object per round) and DIR/join.md; exit 1 when a
round failed (a publisher ended early, a joiner had no output in --join-limit).
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bench_host  # noqa: E402  (the harness's process sampler and plans)

# What a subscriber logs when the publisher closed its first handshake while it made
# its CUDA context, and it connects a second time (protocol-notes D23).
RETRY_WARNING = "connecting again"


def plans(a, key_prefix):
    """(role, stream, consumer, argv): the live publishers, then the joiners,
    subscribers and decoders interleaved stream by stream."""
    h = argparse.Namespace(ffmpeg=a.ffmpeg, memory=a.memory, mode="re", clip=a.clip, order=a.order,
                           pub_options="-policy drop_oldest -wait_subscribers 0", sub_options="",
                           sub_timeout="default", verify=False, verify_dir=None)
    shared = bench_host.commands(h, "cuframes", a.streams, a.consumers, key_prefix)
    direct = bench_host.commands(h, "direct", a.streams, a.consumers, key_prefix)
    publishers = [p for p in shared if p[0] == "pub"]
    subscribers = [p for p in shared if p[0] == "sub"]
    # Progress every 20 ms instead of the harness's 250: the first output's time
    # is when the first report says a frame went out (a later option wins).
    joiners = [(role, s, c, argv[:1] + ["-stats_period", "0.02"] + argv[1:])
               for pair in zip(subscribers, direct) for role, s, c, argv in pair]
    return publishers, joiners


def first_output_ms(procs):
    return [(p.first_output - p.started) * 1000 for p in procs if p.first_output is not None]


def run_once(a, rep):
    workdir = tempfile.mkdtemp(prefix="join-live-")
    env = dict(os.environ, CUFRAMES_RUNTIME_DIR=workdir)
    calls_dir = os.path.join(workdir, "calls")
    if a.calls:
        os.makedirs(calls_dir)
        env.update(CUDA_INJECTION64_PATH=os.path.abspath(a.calls), CUFRAMES_CALLS_DIR=calls_dir)
    sub_env = dict(env, **dict(v.split("=", 1) for v in a.sub_env))
    publishers, joiners = plans(a, "jl%d-%d" % (os.getpid(), rep))
    t0 = time.monotonic()
    pubs = [bench_host.Proc(*plan, workdir, env) for plan in publishers]
    live_at = None
    procs, joined = list(pubs), []
    deadline = t0 + a.limit
    failed = None
    next_sample = t0
    while True:
        now = time.monotonic()
        # The whole /proc sample (CPU, threads) at the harness's 0.25 s; between
        # samples only the joiners still waiting read their progress file.
        if now >= next_sample:
            for p in procs:
                p.sample(now)
            next_sample = now + 0.25
        for p in joined:
            if p.first_output is None:
                frame, _ = p._progress()
                if frame:
                    p.first_output = now
        for p in procs:
            p.poll(now)
        if not joined:
            if any(p.ended is not None for p in pubs):
                failed = "a publisher ended before the joiners started"
                break
            if live_at is None and all(p.first_output is not None for p in pubs):
                live_at = now
            if live_at is not None and now >= live_at + a.after:
                joined = [bench_host.Proc(*plan, workdir, sub_env if plan[0] == "sub" else env)
                          for plan in joiners]
                procs += joined
                deadline = min(deadline, time.monotonic() + a.join_limit)
        elif all(p.first_output is not None or p.ended is not None for p in joined):
            break
        if now > deadline:
            failed = "the joiners took longer than --join-limit" if joined else "the publishers never went live"
            break
        time.sleep(0.02)
    for p in procs:
        p.interrupt()
    for p in procs:
        try:
            p.p.wait(timeout=15)
        except subprocess.TimeoutExpired:  # still running 15 s after SIGINT
            os.killpg(p.pid, signal.SIGKILL)
            p.p.wait()
        p.poll(time.monotonic())
    # The tracer writes a process's calls when it exits.
    profile = bench_host.phase_profile(procs, calls_dir) if a.calls else None
    no_output = [p.name for p in joined if p.first_output is None]
    again = [p.name for p in joined if p.role == "sub" and RETRY_WARNING in p.log_text()]
    if no_output or failed or a.keep_logs:
        dest = os.path.join(a.out, "logs", "r%d" % rep)
        os.makedirs(dest, exist_ok=True)
        for p in procs:
            if p.name in no_output or failed or a.keep_logs:
                with open(os.path.join(dest, p.name + ".log"), "w") as f:
                    f.write(p.log_text())
    shutil.rmtree(workdir, ignore_errors=True)
    roles = {}
    for role in ("sub", "dec"):
        ms = first_output_ms([p for p in joined if p.role == role])
        roles[role] = {"processes": sum(1 for p in joined if p.role == role), "with_output": len(ms),
                       "first_output_ms": {"median": round(statistics.median(ms)), "max": round(max(ms))}
                       if ms else None}
    sub, dec = roles["sub"]["first_output_ms"], roles["dec"]["first_output_ms"]
    return {
        "repeat": rep, "streams": a.streams, "consumers": a.consumers, "memory": a.memory,
        "sub_env": a.sub_env, "publishers_live_s": round(live_at - t0, 2) if live_at else None,
        "roles": roles, "sub_over_dec": round(sub["median"] / dec["median"], 3) if sub and dec else None,
        "without_output": no_output, "connected_again": again, "error": failed, "startup_profile": profile,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ffmpeg", default="build/ffmpeg/bin/ffmpeg")
    ap.add_argument("--memory", choices=["cuda", "host"], default="cuda")
    ap.add_argument("--clip", required=True, help="an H.264 clip longer than the run, the publishers play it "
                    "live (made with testsrc2, as the harness makes its clips, when missing)")
    ap.add_argument("--size", default="1920x1080", help="of a made clip")
    ap.add_argument("--seconds", type=int, default=40, help="length of a made clip")
    ap.add_argument("--fps", type=int, default=30, help="of a made clip")
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--consumers", type=int, default=2, help="subscribers (and decoders) a stream")
    ap.add_argument("--consumer-order", default=",".join(bench_host.ORDER))
    ap.add_argument("--after", type=float, default=3.0, help="seconds every publisher is live before the start")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--limit", type=float, default=120.0, help="seconds until the publishers must be live")
    ap.add_argument("--join-limit", type=float, default=60.0, help="seconds the joiners have for a first output")
    ap.add_argument("--sub-env", action="append", default=[], metavar="VAR=VALUE",
                    help="an environment variable for the subscribers only, e.g. CUDA_DEVICE_MAX_CONNECTIONS=1")
    ap.add_argument("--calls", default=None, metavar="LIB", help="the CUDA call tracer (scripts/gpu/cuda-calls.c)")
    ap.add_argument("--keep-logs", action="store_true")
    ap.add_argument("--out", default="join-live-out")
    a = ap.parse_args()
    a.order = a.consumer_order.split(",")
    if a.consumers < 1 or a.consumers > len(a.order) or any(c not in bench_host.CONSUMERS for c in a.order):
        ap.error("--consumers must be 1 to %d, --consumer-order of %s" % (len(a.order), ", ".join(bench_host.CONSUMERS)))
    if a.streams < 1:
        ap.error("--streams must be 1 or more")
    if not os.path.isdir(os.path.dirname(os.path.abspath(a.clip))):
        ap.error("--clip %s: no such folder" % a.clip)
    bad = [v for v in a.sub_env if "=" not in v or not v.split("=", 1)[0]]
    if bad:
        ap.error("--sub-env takes VAR=VALUE, not %s" % ", ".join(bad))
    os.makedirs(a.out, exist_ok=True)
    bench_host.make_clip(a)
    lines = ["| round | N | K | subscriber env | publishers live at s | subscribers: first output ms "
             "(median / max) | decoders: first output ms | subscriber / decoder | without output | "
             "subscribers connected again | error |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    errors = 0
    with open(os.path.join(a.out, "join.jsonl"), "a") as jsonl:
        for rep in range(a.repeat):
            r = run_once(a, rep)
            jsonl.write(json.dumps(r) + "\n")
            jsonl.flush()
            def cell(role):
                ms = r["roles"][role]["first_output_ms"]
                return "%d / %d" % (ms["median"], ms["max"]) if ms else "–"

            lines.append("| %d | %d | %d | %s | %s | %s | %s | %s | %d | %d | %s |" % (
                rep, a.streams, a.consumers, " ".join(a.sub_env) or "–", r["publishers_live_s"], cell("sub"),
                cell("dec"), r["sub_over_dec"], len(r["without_output"]), len(r["connected_again"]),
                r["error"] or "–"))
            print(lines[-1], flush=True)
            errors += bool(r["error"] or r["without_output"])
            if r["startup_profile"]:
                lines += [""] + bench_host.startup_tables([dict(r, approach="join", repeat=rep)]) + [""]
    with open(os.path.join(a.out, "join.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
