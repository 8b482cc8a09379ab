#!/usr/bin/env python3
"""The transcoding-host benchmark (scripts/bench-host.sh runs this).

N streams, each read by K consumers, two ways:

  cuframes  N ffmpeg publishers decode once (NVDEC, or the CPU with --memory host)
            and publish (-f cuframes, strict_wait, wait_subscribers K); N*K ffmpeg
            subscribers run the consumers on the shared frames.
  direct    N*K ffmpeg processes, each decoding the stream itself (the habit
            cuframes replaces).

Consumers, k = 1..K (CUDA / host memory):
  1 null     -f null
  2 scale    scale_cuda=640:360 / scale=640:360
  3 cpu      one frame in 30 downloaded to host memory (select, hwdownload)
  4 hold     an encoder stand-in that keeps 8 frames and does no GPU work
             (shuffleframes with the identity mapping of 8)
  thumb      (with --consumer-order) also keeps 8 frames, but is GPU-bound
             (thumbnail_cuda=8 / thumbnail=8)

Every process runs in its own session; /proc is sampled every 0.25 s: CPU per
process and per thread, context switches, progress (-progress files), GPU memory
per process and decoder/SM utilisation (nvidia-smi). The steady state is the
window from --settle s (1) after the last process's first output until the
first process ends (or --steady s later, when the harness ends the run);
start-up is what comes before. Real time: the slowest stream at 97 % of the
rate or more in the window, and no process failed. Results: one JSON object per
run in OUT/runs.jsonl, and OUT/summary.md (medians and spread over repeats).
"""

import argparse
import collections
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")

CONSUMERS = {
    # name: (cuda filter chain or None, host filter chain or None)
    "null": (None, None),
    "scale": ("scale_cuda=640:360", "scale=640:360"),
    "cpu": ("select='not(mod(n,30))',hwdownload,format=nv12", "select='not(mod(n,30))'"),
    # Holds 8 frames, then passes them on, and does no GPU work: an encoder's
    # lookahead without the encoder (NVENC runs on its own engine; the H200 has none).
    "hold": ("shuffleframes=0|1|2|3|4|5|6|7",) * 2,
    # Holds 8 frames too, but its histogram kernel (global atomics) takes ~1 ms of
    # the whole GPU per 1080p frame: a GPU-bound consumer (docs/benchmarks.md).
    "thumb": ("thumbnail_cuda=8", "thumbnail=8"),
}
ORDER = ["null", "scale", "cpu", "hold"]
DRIVER_THREAD = "cuda-EvtHandlr"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Proc:
    """One ffmpeg process under observation."""

    def __init__(self, role, stream, consumer, argv, workdir, env):
        self.role, self.stream, self.consumer = role, stream, consumer
        self.name = "%s-%d%s" % (role, stream, "-" + consumer if consumer else "")
        self.progress = os.path.join(workdir, self.name + ".progress")
        self.errpath = os.path.join(workdir, self.name + ".err")
        argv = argv[:1] + ["-nostdin", "-hide_banner", "-nostats", "-benchmark",
                           "-progress", self.progress, "-stats_period", "0.25"] + argv[1:]
        self.argv = argv
        self.err = open(self.errpath, "w")
        self.started = time.monotonic()
        self.spawned_ns = time.time_ns()  # CLOCK_REALTIME, as the call tracer's times
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.err,
                                  env=env, start_new_session=True)
        self.pid = self.p.pid
        self.ended = None
        self.rc = None
        self.killed = False  # by the harness, at --limit
        self.cpu = {}      # t -> cpu seconds (process)
        self.threads = {}  # comm -> [(t, cpu_s, ctxsw)]
        self.frames = {}   # t -> frame count (publishers, direct decoders)
        self.pos = {}      # t -> out_time seconds
        self.first_output = None
        self.driver_cpu = {}  # t -> cpu seconds of the driver's event thread

    def sample(self, now):
        if self.ended is not None:
            return
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            self.cpu[now] = (int(fields[11]) + int(fields[12])) / TICK
        except OSError:
            return
        per = {}
        try:
            for tid in os.listdir("/proc/%d/task" % self.pid):
                try:
                    with open("/proc/%d/task/%s/stat" % (self.pid, tid)) as f:
                        raw = f.read()
                    comm = raw[raw.index("(") + 1:raw.rindex(")")]
                    fields = raw.rsplit(")", 1)[1].split()
                    cpu = (int(fields[11]) + int(fields[12])) / TICK
                    sw = 0
                    with open("/proc/%d/task/%s/status" % (self.pid, tid)) as f:
                        for line in f:
                            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                                sw += int(line.split()[1])
                    c, s = per.get(comm, (0.0, 0))
                    per[comm] = (c + cpu, s + sw)
                except (OSError, ValueError):
                    continue
        except OSError:
            pass
        for comm, (c, s) in per.items():
            self.threads.setdefault(comm, []).append((now, c, s))
        # The CUDA driver's event thread, apart: it wakes for the whole GPU's
        # work, not this process's (docs/benchmarks.md), so CPU net of it is
        # what the process itself spends.
        if DRIVER_THREAD in per:
            self.driver_cpu[now] = per[DRIVER_THREAD][0]
        frame, pos = self._progress()
        if frame is not None:
            self.frames[now] = frame
            if frame > 0 and self.first_output is None:
                self.first_output = now
        if pos is not None:
            self.pos[now] = pos

    def _progress(self):
        try:
            with open(self.progress) as f:
                text = f.read()
        except OSError:
            return None, None
        frames = re.findall(r"^frame=(\d+)", text, re.M)
        times = re.findall(r"^out_time_us=(\d+)", text, re.M)
        return (int(frames[-1]) if frames else None,
                int(times[-1]) / 1e6 if times and times[-1] != "N/A" else None)

    def interrupt(self):
        """SIGINT to its session, if it still runs: ffmpeg ends cleanly on it."""
        if self.ended is None:
            try:
                os.killpg(self.pid, signal.SIGINT)
            except OSError:
                pass

    def poll(self, now):
        if self.ended is None and self.p.poll() is not None:
            self.ended, self.rc = now, self.p.returncode
            self.err.close()
        return self.ended is not None

    def at(self, series, t):
        """The value of a sampled series at (just before) time t."""
        keys = [k for k in series if k <= t]
        return series[max(keys)] if keys else None

    def thread_report(self):
        """CPU seconds and context switches per thread name: until the first
        output (start-up) and over the whole life, from the last sample."""
        lines = ["# thread: cpu_s ctxsw until first output | cpu_s ctxsw in all (rc %s)" % self.rc]
        for comm, series in sorted(self.threads.items(), key=lambda kv: -kv[1][-1][1]):
            early = [x for x in series if self.first_output is not None and x[0] <= self.first_output]
            head = "%.2f %d" % early[-1][1:] if early else "- -"
            lines.append("%s: %s | %.2f %d" % (comm, head, series[-1][1], series[-1][2]))
        return "\n".join(lines) + "\n"

    def log_text(self):
        try:
            with open(self.errpath) as f:
                return f.read()
        except OSError:
            return ""


def gpu_sampler(workdir):
    if not shutil.which("nvidia-smi"):
        return None
    out = open(os.path.join(workdir, "dmon.txt"), "w")
    return subprocess.Popen(["nvidia-smi", "dmon", "-s", "u", "-d", "1"], stdout=out,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def gpu_memory():
    """pid -> MiB of GPU memory (compute apps)."""
    if not shutil.which("nvidia-smi"):
        return {}
    try:
        text = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                               "--format=csv,noheader,nounits"], capture_output=True,
                              text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    mem = {}
    for line in text.splitlines():
        try:
            pid, mib = [x.strip() for x in line.split(",")]
            mem[int(pid)] = int(mib)
        except ValueError:
            continue
    return mem


def dmon_averages(path):
    sm, dec = [], []
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                cols = line.split()
                # gpu sm mem enc dec jpg ofa (ffmpeg-era drivers: gpu sm mem enc dec)
                try:
                    sm.append(float(cols[1]))
                    dec.append(float(cols[4]))
                except (ValueError, IndexError):
                    continue
    except OSError:
        pass
    avg = lambda xs: round(sum(xs) / len(xs), 1) if xs else None
    return avg(sm), avg(dec)


def commands(a, approach, n, k, key_prefix):
    """(role, stream, consumer, argv) for every process of one run."""
    ff = a.ffmpeg
    cuda = a.memory == "cuda"
    decode = (["-hwaccel", "cuda", "-hwaccel_output_format", "cuda"] if cuda else []) + \
        (["-re"] if a.mode == "re" else []) + ["-i", a.clip]
    procs = []
    consumers = a.order[:k]
    for s in range(n):
        key = "%s-%d" % (key_prefix, s)
        if approach == "cuframes":
            procs.append(("pub", s, None, [ff] + decode + (["-pix_fmt", "nv12"] if not cuda else []) +
                          ["-f", "cuframes", "-policy", "strict_wait", "-wait_subscribers", str(k)] +
                          a.pub_options.split() + [key]))
        for c in consumers:
            chain = CONSUMERS[c][0 if cuda else 1]
            if a.verify and approach == "direct":
                # The same pixels as a subscriber gets: the publisher hands on NV12.
                chain = "format=nv12" + ("," + chain if chain else "")
            if approach == "cuframes":
                wait = ([] if a.sub_timeout == "default" else
                        ["-timeout", a.sub_timeout, "-wait_timeout", a.sub_timeout])
                src = ["-f", "cuframes"] + wait + a.sub_options.split() + ["-i", key]
            else:
                src = decode
            sink = ["-f", "framemd5", md5_path(a.verify_dir, approach, s, c)] if a.verify else ["-f", "null", "-"]
            procs.append(("sub" if approach == "cuframes" else "dec", s, c,
                          [ff] + src + (["-vf", chain] if chain else []) + sink))
    return procs


def md5_path(directory, approach, stream, consumer):
    return os.path.join(directory, "%s-%d-%s.framemd5" % (approach, stream, consumer))


def frame_hashes(path):
    """The (size, MD5) of each frame of a framemd5 file: what must match between
    the approaches (timestamps differ: a subscriber's count from the publisher's)."""
    try:
        with open(path) as f:
            return [tuple(x.strip() for x in line.split(",")[-2:]) for line in f
                    if line.strip() and not line.startswith("#")]
    except OSError:
        return None


def verify_frames(a, n, k):
    """--verify: every cuframes consumer's frames against the same consumer
    decoding for itself, stream by stream. Returns (ok, lines)."""
    ok, lines = True, []
    for c in a.order[:k]:
        for s in range(n):
            ref = frame_hashes(md5_path(a.verify_dir, "direct", s, c))
            got = frame_hashes(md5_path(a.verify_dir, "cuframes", s, c))
            if not ref:
                ok = False
                lines.append("stream %d %s: decoding for itself gave no frames" % (s, c))
            elif got != ref:
                ok = False
                first = next((i for i, (x, y) in enumerate(zip(got or [], ref)) if x != y), None)
                lines.append("stream %d %s: %s frames through cuframes, %d decoding for itself%s" % (
                    s, c, len(got) if got is not None else "no", len(ref),
                    ", frame %d differs" % first if first is not None else ""))
            else:
                lines.append("stream %d %s: %d frames, exact" % (s, c, len(ref)))
    return ok, lines


# Start-up phases from the call tracer (scripts/gpu/cuda-calls.c), in ms since
# the process was spawned: (phase, functions, which time of theirs). A phase a
# process never reached is left out.
PHASES = [
    ("context", ("cuDevicePrimaryCtxRetain", "cuCtxCreate"), "first_end_ns"),
    ("slots imported", ("cuMemImportFromShareableHandle", "cuIpcOpenMemHandle", "cuIpcOpenEventHandle",
                        "cuMemSetAccess"), "last_end_ns"),
    ("first frame", ("cuStreamWaitValue64", "cuStreamWaitEvent", "cuEventQuery", "cuMemcpy2DAsync",
                     "cuMemcpy2D"), "first_start_ns"),
]


PHASE_ORDER = ["cuInit"] + [ph for ph, _, _ in PHASES] + ["first output"]


def read_calls(path):
    """A tracer file: ({"inject_ns": .., "exit_ns": ..}, {function: {field: int}}), or None."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    if not lines or "error=" in lines[0]:
        return None
    head = dict(kv.split("=", 1) for kv in lines[0].split()[1:])
    calls = {}
    for line in lines[1:]:
        name, *fields = line.split()
        calls[name] = {k: int(v) for k, v in (kv.split("=", 1) for kv in fields)}
    return {k: int(v) for k, v in head.items()}, calls


def phase_profile(procs, calls_dir):
    """Per role: each start-up phase's median and max (ms since spawn) and the
    driver calls that took the most time (median per process; the longest single
    call anywhere: the ones that wait on the driver's serialisation balloon)."""
    by_role = {}
    for p in procs:
        traced = read_calls(os.path.join(calls_dir, "calls-%d.txt" % p.pid))
        if traced is None:
            continue
        head, calls = traced
        phases = {"cuInit": (head["inject_ns"] - p.spawned_ns) / 1e6}
        for phase, prefixes, field in PHASES:
            times = [c[field] for name, c in calls.items() if name.startswith(prefixes)]
            if times:
                pick = max if field == "last_end_ns" else min
                phases[phase] = (pick(times) - p.spawned_ns) / 1e6
        if p.first_output is not None:
            phases["first output"] = (p.first_output - p.started) * 1000
        role = by_role.setdefault(p.role, {"phases": {}, "calls": {}, "processes": 0})
        role["processes"] += 1
        for phase, ms in phases.items():
            role["phases"].setdefault(phase, []).append(ms)
        for name, c in calls.items():
            role["calls"].setdefault(name, []).append((c["count"], c["total_us"] / 1000, c["max_us"] / 1000))
    report = {}
    for role, r in by_role.items():
        calls = sorted(r["calls"].items(), key=lambda kv: -statistics.median(x[1] for x in kv[1]))[:12]
        report[role] = {
            "processes": r["processes"],
            "phases_ms": {ph: {"median": round(statistics.median(v), 1), "max": round(max(v), 1)}
                          for ph, v in r["phases"].items()},
            "calls": [{"function": name, "count": statistics.median(x[0] for x in v),
                       "total_ms": round(statistics.median(x[1] for x in v), 2),
                       "max_ms": round(max(x[2] for x in v), 2)} for name, v in calls],
        }
    return report


def run_once(a, approach, n, k, rep):
    workdir = tempfile.mkdtemp(prefix="bench-host-", dir=a.work)
    runtime = os.path.join(workdir, "run")
    os.makedirs(runtime)
    env = dict(os.environ, CUFRAMES_RUNTIME_DIR=runtime)
    calls_dir = os.path.join(workdir, "calls")
    if a.calls:
        os.makedirs(calls_dir)
        env.update(CUDA_INJECTION64_PATH=os.path.abspath(a.calls), CUFRAMES_CALLS_DIR=calls_dir)
    key_prefix = "bh%d" % os.getpid()
    plan = commands(a, approach, n, k, key_prefix)
    dmon = gpu_sampler(workdir)
    t0 = time.monotonic()
    sub_env = dict(env, **dict(v.split("=", 1) for v in a.sub_env))
    procs = [Proc(role, s, c, argv, workdir, sub_env if role == "sub" else env) for role, s, c, argv in plan]
    started = time.monotonic()
    mem_samples = []
    deadline = t0 + a.limit
    next_mem = t0 + 2.0
    stop_at = None  # when the harness ended a run after --steady seconds
    while True:
        now = time.monotonic()
        for p in procs:
            p.sample(now)
        done = [p.poll(now) for p in procs]
        if now >= next_mem:
            mem_samples.append(gpu_memory())
            next_mem = now + 2.0
        if all(done):
            break
        if a.steady and stop_at is None and all(p.first_output is not None for p in procs) \
                and now >= max(p.first_output for p in procs) + a.settle + a.steady:
            # Measured long enough: ffmpeg's own SIGINT handling ends each cleanly.
            stop_at = now
            for p in procs:
                p.interrupt()
            deadline = min(deadline, now + 15.0)
        if now > deadline:
            for p in procs:
                if p.ended is None:
                    p.killed = True
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
            for p in procs:
                p.p.wait()
                p.poll(time.monotonic())
            break
        time.sleep(0.25)
    wall = max(p.ended for p in procs) - t0
    if dmon:
        os.killpg(dmon.pid, signal.SIGTERM)
        dmon.wait()
    sm, dec = dmon_averages(os.path.join(workdir, "dmon.txt"))

    # Steady window: from --settle s after every process produced output to the
    # first end (or the harness's stop).
    outs = [p.first_output for p in procs if p.first_output is not None]
    w0 = (max(outs) + a.settle) if len(outs) == len(procs) else None
    w1 = min([p.ended for p in procs] + ([stop_at] if stop_at else [])) - 0.3
    steady = None
    if w0 is not None and w1 - w0 >= 1.0:
        cpu = sum((p.at(p.cpu, w1) or 0) - (p.at(p.cpu, w0) or 0) for p in procs)
        # Frames each process went through in the window: a publisher's frames
        # decoded; a consumer's by output time (consumers that drop frames
        # output fewer). None where the window has no sample.
        def window_frames(p):
            if p.role == "pub":
                f0, f1 = p.at(p.frames, w0), p.at(p.frames, w1)
                return None if f0 is None or f1 is None else f1 - f0
            q0, q1 = p.at(p.pos, w0), p.at(p.pos, w1)
            return None if q0 is None or q1 is None else (q1 - q0) * a.fps

        frames = {p: window_frames(p) or 0.0 for p in procs}
        consumer_frames = sum(f for p, f in frames.items() if p.role != "pub")
        # Source frames: the publishers'; decoding directly, each stream's K
        # decoders went through them K times.
        src_frames = (consumer_frames / k if approach == "direct"
                      else sum(f for p, f in frames.items() if p.role == "pub"))
        sub_cpu = sum((p.at(p.cpu, w1) or 0) - (p.at(p.cpu, w0) or 0) for p in procs if p.role != "pub")
        sub_driver_cpu = sum((p.at(p.driver_cpu, w1) or 0) - (p.at(p.driver_cpu, w0) or 0)
                             for p in procs if p.role != "pub")
        pub_cpu = cpu - sub_cpu
        # Each consumer's own rate (per stream): under strict_wait a stream's
        # consumers go at the pace of its slowest; decoding for themselves,
        # each goes at its own.
        per_consumer = {}
        for p, f in frames.items():
            if p.role != "pub":
                per_consumer[p.consumer] = per_consumer.get(p.consumer, 0.0) + f
        consumer_fps = {c: round(per_consumer[c] / n / (w1 - w0), 1) for c in a.order if c in per_consumer}
        stream_fps = src_frames / n / (w1 - w0)
        # The slowest stream: its publisher's rate, or its slowest decoder's.
        # Real time is judged on it, not on the mean (a stream catching up
        # after a slow start runs above the rate and would hide a late one).
        per_stream = {}
        for p, f in frames.items():
            if (approach == "cuframes") == (p.role == "pub"):
                per_stream[p.stream] = min(per_stream.get(p.stream, f), f)
        steady = {
            "window_s": round(w1 - w0, 2),
            "cpu_s": round(cpu, 2),
            "source_frames": round(src_frames),
            "consumer_frames": round(consumer_frames),
            "cpu_ms_per_source_frame": round(cpu / src_frames * 1000, 3) if src_frames else None,
            "cpu_ms_per_consumer_frame": round(sub_cpu / consumer_frames * 1000, 3) if consumer_frames else None,
            "cpu_ms_per_consumer_frame_net_of_driver": round((sub_cpu - sub_driver_cpu) / consumer_frames * 1000, 3)
            if consumer_frames else None,
            "consumer_fps": consumer_fps,
            "publisher_cpu_ms_per_frame": round(pub_cpu / src_frames * 1000, 3)
            if approach == "cuframes" and src_frames else None,
            "stream_fps": round(stream_fps, 1),
            "slowest_stream_fps": round(min(per_stream.values()) / (w1 - w0), 1) if per_stream else None,
            "aggregate_fps": round(src_frames / (w1 - w0), 1),
        }
        threads = {}
        for p in procs:
            for comm, samples in p.threads.items():
                before = [s for s in samples if s[0] <= w0]
                after = [s for s in samples if s[0] <= w1]
                if not before or not after:
                    continue
                key = "%s:%s" % (p.role, re.sub(r"\d+", "N", comm))
                c, sw = threads.get(key, (0.0, 0))
                threads[key] = (c + after[-1][1] - before[-1][1], sw + after[-1][2] - before[-1][2])
        steady["threads"] = {k2: {"cpu_s": round(v[0], 2), "ctxsw": v[1]}
                             for k2, v in sorted(threads.items(), key=lambda kv: -kv[1][0])[:12]}
    total_cpu = sum(max(p.cpu.values()) if p.cpu else 0 for p in procs)
    # The whole job, start-up included: every consumer's frames over the time
    # until the last process ended (the first measure).
    job_frames = sum(max(p.pos.values()) * a.fps for p in procs if p.role != "pub" and p.pos)
    # Start-up: what each process used until its first output.
    startup_cpu = None
    if len(outs) == len(procs):
        startup_cpu = round(sum(p.at(p.cpu, p.first_output) or 0 for p in procs), 2)
    # A process ended by the harness after --steady is not a failure; one that
    # had ended before is judged by its exit status, and one that was still
    # running at --limit (SIGINT ignored for 15 s, or never reached) failed.
    failures = [p.name for p in procs
                if p.rc != 0 and (stop_at is None or p.ended < stop_at or p.killed)]
    lost = sum(1 for p in procs if re.search(r"Lost \d+ frame|dropped by publisher", p.log_text()))
    causes = collections.Counter("%s: %s" % (p.role, failure_cause(p.log_text()))
                                 for p in procs if p.name in failures)
    mems = {}
    for sample in mem_samples:
        for p in procs:
            if p.pid in sample:
                mems.setdefault(p.role, []).append(sample[p.pid])
    result = {
        "approach": approach + (" " + a.label if a.label and approach == "cuframes" else ""),
        "streams": n, "consumers": k, "mode": a.mode, "memory": a.memory,
        "repeat": rep, "wall_s": round(wall, 2), "cpu_s": round(total_cpu, 2),
        "job_consumer_fps": round(job_frames / wall, 1) if wall > 0 else None,
        "startup_cpu_s": startup_cpu, "steady": steady, "failures": failures, "failure_causes": dict(causes),
        "processes_reporting_loss": lost, "gpu_sm_util": sm, "nvdec_util": dec,
        "gpu_mib_per_process": {r: round(statistics.median(v)) for r, v in mems.items()},
        "processes": len(procs),
        "stopped_after_steady_s": a.steady if stop_at else None,
    }
    if a.mode == "re":
        # Playing in real time, a process that keeps up ends one clip length after
        # its first output; lag is how much later it ended.
        lags = [p.ended - p.first_output - a.duration for p in procs
                if p.first_output is not None and not stop_at]
        result["max_lag_s"] = round(max(lags), 2) if lags else None
        # Real time in the steady state (start-up apart): every stream at 97 % of
        # its rate or more, no process failed. Unknown (None) without a window.
        result["real_time"] = None if not steady else (
            (steady["slowest_stream_fps"] or 0) >= 0.97 * a.fps and not failures)
    if a.calls:
        result["startup_profile"] = phase_profile(procs, calls_dir)
    lossy = [p for p in procs if re.search(r"Lost \d+ frame|dropped by publisher", p.log_text())]
    if failures or lossy or a.keep_logs:
        dest = os.path.join(a.out, "logs", "%s-n%d-k%d-%s-r%d" % (approach, n, k, a.mode, rep))
        os.makedirs(dest, exist_ok=True)
        for p in procs:
            if p.name in failures or p in lossy or a.keep_logs:
                shutil.copy(p.errpath, dest)
                with open(os.path.join(dest, p.name + ".threads"), "w") as f:
                    f.write(p.thread_report())
    shutil.rmtree(workdir, ignore_errors=True)
    return result


# The first line of a failed process's log that says why, with what differs from
# process to process (keys, numbers, addresses) masked, so that failures group.
FAILURE_LINE = re.compile(r"Cannot|No frame|[Ee]rror|failed|CUDA_ERROR_|Only \d+ of \d+|[Tt]imed out|Killed")


def failure_cause(text):
    for line in text.splitlines():
        if FAILURE_LINE.search(line):
            line = re.sub(r"^\[[^]]*\] ", "", line.strip())
            line = re.sub(r"'[^']*'", "'KEY'", line)
            line = re.sub(r"0x[0-9a-f]+", "0x…", line)
            return re.sub(r"\d+(\.\d+)?", "N", line)[:160]
    return "no error line (exit status only)"


def failure_table(runs):
    """Failed processes by role and cause, summed over runs (cause: the first
    error line of each one's log)."""
    totals = collections.Counter()
    for r in runs:
        for cause, n in r.get("failure_causes", {}).items():
            totals[(r["approach"], r["streams"], r["consumers"], cause)] += n
    if not totals:
        return []
    lines = ["", "Failures by cause (the first error line of each failed process's log, summed over runs):", "",
             "| approach | N | K | processes | role: cause |", "|---|---|---|---|---|"]
    for (approach, n, k, cause), count in sorted(totals.items(), key=lambda kv: (kv[0][:3], -kv[1])):
        lines.append("| %s | %d | %d | %d | %s |" % (approach, n, k, count, cause.replace("|", "\\|")))
    return lines


def summarize(runs, out):
    groups = {}
    for r in runs:
        groups.setdefault((r["mode"], r["streams"], r["consumers"], r["approach"]), []).append(r)
    lines = ["| mode | N | K | approach | runs | wall s | agg. fps (steady) | CPU ms/source frame | "
             "CPU ms/consumer frame (net of driver thread) | fps per consumer | whole-job consumer fps | "
             "pub CPU ms/frame | start-up CPU s | real time (max lag s) | failures | loss | "
             "NVDEC % | SM % | GPU MiB/proc |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def med(vals):
        vals = [v for v in vals if v is not None]
        if not vals:
            return "–"
        m = statistics.median(vals)
        if len(vals) == 1:
            return "%g" % m
        return "%g (%g–%g)" % (m, min(vals), max(vals))

    for key in sorted(groups):
        rs = groups[key]
        st = [r["steady"] or {} for r in rs]
        lines.append("| %s | %d | %d | %s | %d | %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s | %d | %d | %s | %s | %s |" % (
            key[0], key[1], key[2], key[3], len(rs), med([r["wall_s"] for r in rs]),
            med([s.get("aggregate_fps") for s in st]),
            med([s.get("cpu_ms_per_source_frame") for s in st]),
            med([s.get("cpu_ms_per_consumer_frame") for s in st]),
            med([s.get("cpu_ms_per_consumer_frame_net_of_driver") for s in st]),
            ", ".join("%s %s" % (c, med([s.get("consumer_fps", {}).get(c) for s in st]))
                      for c in CONSUMERS if any(c in s.get("consumer_fps", {}) for s in st)) or "–",
            med([r.get("job_consumer_fps") for r in rs]),
            med([s.get("publisher_cpu_ms_per_frame") for s in st]),
            med([r["startup_cpu_s"] for r in rs]),
            "/".join({True: "yes", False: "no", None: "?"}[r.get("real_time")] + " (%s)" % r.get("max_lag_s")
                     for r in rs)
            if key[0] == "re" else "–",
            sum(len(r["failures"]) for r in rs), sum(r["processes_reporting_loss"] for r in rs),
            med([r["nvdec_util"] for r in rs]), med([r["gpu_sm_util"] for r in rs]),
            ", ".join("%s %s" % (role, mib) for role, mib in sorted(rs[0]["gpu_mib_per_process"].items())) or "–"))
    lines += whole_job_table(groups, med) + startup_tables(runs) + failure_table(runs)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return "\n".join(lines)


def whole_job_table(groups, med):
    """The whole job, start-up included, both approaches side by side: the same
    work, so throughput is the ratio of wall times (direct / cuframes) and CPU the
    ratio of CPU (cuframes / direct); medians over repeats."""
    lines = ["", "Whole job (all processes started together, until the last ended):", "",
             "| mode | N | K | cuframes wall s | direct wall s | throughput | cuframes CPU s | direct CPU s | CPU | "
             "frames exact |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    pairs = 0
    for (mode, n, k, approach), rs in sorted(groups.items()):
        direct = groups.get((mode, n, k, "direct"))
        if not approach.startswith("cuframes") or not direct:
            continue
        pairs += 1
        cw, dw = statistics.median(r["wall_s"] for r in rs), statistics.median(r["wall_s"] for r in direct)
        cc, dc = statistics.median(r["cpu_s"] for r in rs), statistics.median(r["cpu_s"] for r in direct)
        exact = [r.get("frames_exact") for r in rs if r.get("frames_exact") is not None]
        lines.append("| %s | %d | %d | %s | %s | **%.2f×** | %s | %s | %.2f× | %s |" % (
            mode, n, k, med([r["wall_s"] for r in rs]), med([r["wall_s"] for r in direct]), dw / cw if cw else 0,
            med([r["cpu_s"] for r in rs]), med([r["cpu_s"] for r in direct]), cc / dc if dc else 0,
            ("yes" if all(exact) else "**no**") if exact else "not checked"))
    return lines if pairs else []


def startup_tables(runs):
    """--calls: start-up phases (ms since spawn, median and max over a run's
    processes) and the driver calls that took longest, per run and role."""
    lines = []
    for r in runs:
        profile = r.get("startup_profile")
        if not profile:
            continue
        lines += ["", "Start-up by phase, %s N=%d K=%d rep %d (ms since spawn, median / max; "
                  "scripts/gpu/cuda-calls.c):" % (r["approach"], r["streams"], r["consumers"], r["repeat"]), "",
                  "| role | processes | " + " | ".join(ph for ph in PHASE_ORDER) + " |",
                  "|---|---|" + "---|" * len(PHASE_ORDER)]
        for role, prof in sorted(profile.items()):
            cells = [("%g / %g" % (prof["phases_ms"][ph]["median"], prof["phases_ms"][ph]["max"]))
                     if ph in prof["phases_ms"] else "–" for ph in PHASE_ORDER]
            lines.append("| %s | %d | %s |" % (role, prof["processes"], " | ".join(cells)))
        lines += ["", "| role | driver call | count | ms per process (median) | longest call ms |",
                  "|---|---|---|---|---|"]
        for role, prof in sorted(profile.items()):
            for c in prof["calls"]:
                lines.append("| %s | %s | %g | %g | %g |" % (role, c["function"], c["count"], c["total_ms"],
                                                             c["max_ms"]))
    return lines


def clip_duration(a):
    out = subprocess.run([a.ffmpeg, "-hide_banner", "-i", a.clip], capture_output=True, text=True).stderr
    m = re.search(r"Duration: (\d+):(\d+):(\d+\.\d+)", out)
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)) if m else float(a.seconds)


def make_clip(a):
    if os.path.exists(a.clip):
        return
    log("bench-host: making %s (%s, %d s at %d fps, H.264)" % (a.clip, a.size, a.seconds, a.fps))
    subprocess.run([a.ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                    "testsrc2=size=%s:rate=%d" % (a.size, a.fps), "-t", str(a.seconds),
                    "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "6M", "-maxrate", "6M", "-bufsize", "12M",
                    "-pix_fmt", "yuv420p", "-g", "60", "-y",
                    a.clip], check=True)


def warm_jit(a):
    """FFmpeg's CUDA filters ship as PTX: the first process that loads one has
    the driver compile it (seconds of CPU, more on a loaded host) and cache
    the result. Done once here, so that neither approach's runs pay it (the
    first run's would otherwise, and under strict_wait a subscriber's start-up
    counts against its publisher's startup_timeout)."""
    chains = ",".join(CONSUMERS[c][0] for c in CONSUMERS if CONSUMERS[c][0] and "cuda" in CONSUMERS[c][0])
    t0 = time.monotonic()
    r = subprocess.run([a.ffmpeg, "-nostdin", "-v", "error", "-hwaccel", "cuda", "-hwaccel_output_format",
                        "cuda", "-i", a.clip, "-frames:v", "1", "-vf", chains, "-f", "null", "-"],
                       capture_output=True, text=True)
    log("bench-host: CUDA filters loaded once (%s) in %.1f s%s" % (
        chains, time.monotonic() - t0, "" if r.returncode == 0 else ": FAILED " + r.stderr.strip()[-300:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ffmpeg", default="build/ffmpeg/bin/ffmpeg")
    ap.add_argument("--memory", choices=["cuda", "host"], default="cuda")
    ap.add_argument("--clip", default=None, help="H.264 clip (made with testsrc2 when missing)")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--seconds", type=int, default=20, help="length of a made clip")
    ap.add_argument("--streams", default="8,16")
    ap.add_argument("--consumers", default="1,2,3,4")
    ap.add_argument("--approaches", default="cuframes,direct")
    ap.add_argument("--mode", choices=["re", "fast"], default="fast",
                    help="re: streams played in real time (-re); fast: as fast as possible")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--capacity", default=None,
                    help="comma list of N to try with K=3 in real time, for each approach, until one misses")
    ap.add_argument("--limit", type=float, default=180.0, help="seconds a run may take")
    ap.add_argument("--steady", type=float, default=None,
                    help="end each run (SIGINT, not counted as a failure) once it has been in the steady "
                         "state this many seconds; with a long clip, measures without waiting for its end")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds after every process's first output before the steady window opens "
                         "(in real time, streams that started late catch up first)")
    ap.add_argument("--keep-logs", action="store_true")
    ap.add_argument("--cold-jit", action="store_true",
                    help="skip filling the CUDA JIT cache before the runs (FFmpeg's CUDA filters are PTX, "
                         "compiled by the driver in the first process that loads them)")
    ap.add_argument("--sub-options", default="", help="extra input options of cuframes subscribers (e.g. '-copy always')")
    ap.add_argument("--pub-options", default="", help="extra options of cuframes publishers (e.g. '-ring_size 8')")
    ap.add_argument("--sub-timeout", default="30",
                    help="the subscribers' -timeout and -wait_timeout ('default': neither given, "
                         "the input device's 5 s a frame and 30 s for the publisher and its first frame)")
    ap.add_argument("--sub-env", action="append", default=[], metavar="VAR=VALUE",
                    help="an environment variable for cuframes subscribers only (repeatable), e.g. "
                         "CUDA_DEVICE_MAX_CONNECTIONS=1")
    ap.add_argument("--consumer-order", default=",".join(ORDER),
                    help="which consumers stream k gets, in order (K takes the first K); e.g. 'hold' alone "
                         "with --approaches direct --consumers 1 measures that consumer's own scaling")
    ap.add_argument("--label", default="", help="a name for this variant in the results")
    ap.add_argument("--verify", action="store_true",
                    help="consumers write per-frame MD5s (-f framemd5) instead of -f null, and every cuframes "
                         "consumer's frames must equal the same consumer's decoding for itself; exits 1 when "
                         "they differ or a process failed (host memory, both approaches, runs to the clip's end)")
    ap.add_argument("--calls", default=None, metavar="LIB",
                    help="the CUDA call tracer (scripts/gpu/cuda-calls.c built as a shared library): start-up "
                         "by phase and the driver calls that took longest, per role. It costs ~1 µs a call: "
                         "profile with it, time without it")
    ap.add_argument("--out", default="bench-host-out")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    a.work = a.work or tempfile.gettempdir()
    a.order = a.consumer_order.split(",")
    unknown = [c for c in a.order if c not in CONSUMERS]
    if unknown:
        ap.error("unknown consumer %s (known: %s)" % (", ".join(unknown), ", ".join(CONSUMERS)))
    if max(int(x) for x in a.consumers.split(",")) > len(a.order):
        ap.error("--consumers asks for more consumers than --consumer-order names")
    if a.verify and (a.memory != "host" or a.steady or a.capacity or a.approaches != "cuframes,direct"):
        ap.error("--verify compares host-memory runs of both approaches that end with the clip "
                 "(--memory host, no --steady, no --capacity, --approaches cuframes,direct)")
    bad = [v for v in a.sub_env if "=" not in v or not v.split("=", 1)[0]]
    if bad:
        ap.error("--sub-env takes VAR=VALUE, not %s" % ", ".join(bad))
    if a.calls and not os.path.exists(a.calls):
        ap.error("--calls %s: no such file (build scripts/gpu/cuda-calls.c with cc -shared -fPIC ... -ldl)" % a.calls)
    a.verify_dir = os.path.join(a.out, "frames")
    a.clip = a.clip or os.path.join(a.out, "clip-%s-%ds.mp4" % (a.size, a.seconds))
    make_clip(a)
    a.duration = clip_duration(a)
    if a.memory == "cuda" and not a.cold_jit:
        warm_jit(a)
    runs = []
    verified = []
    jsonl = open(os.path.join(a.out, "runs.jsonl"), "a")

    def record(r):
        runs.append(r)
        jsonl.write(json.dumps(r) + "\n")
        jsonl.flush()
        st = r["steady"] or {}
        log("bench-host: %-8s N=%-2d K=%d %s rep %d: wall %.1f s, steady %s fps, %s ms CPU/source frame, "
            "%s ms/consumer frame (%s net of the driver's thread), per consumer %s, slowest stream %s fps%s%s%s" % (
                r["approach"], r["streams"], r["consumers"], r["mode"], r["repeat"], r["wall_s"],
                st.get("aggregate_fps"), st.get("cpu_ms_per_source_frame"), st.get("cpu_ms_per_consumer_frame"),
                st.get("cpu_ms_per_consumer_frame_net_of_driver"), st.get("consumer_fps"), st.get("slowest_stream_fps"),
                ", real time" if r.get("real_time") else (", NOT real time" if a.mode == "re" else ""),
                ", %d failed" % len(r["failures"]) if r["failures"] else "",
                ", %d reported loss" % r["processes_reporting_loss"] if r["processes_reporting_loss"] else ""))

    approaches = a.approaches.split(",")
    if a.capacity:
        a.mode = "re"
        # N grows for both approaches together (one ends where it first
        # misses real time), so a run cut short still compares them.
        live = list(approaches)
        for n in [int(x) for x in a.capacity.split(",")]:
            for approach in list(live):
                r = run_once(a, approach, n, 3, 0)
                r["capacity_probe"] = True
                record(r)
                if r.get("real_time") is not True:
                    live.remove(approach)
            if not live:
                break
    else:
        for rep in range(a.repeat):
            for n in [int(x) for x in a.streams.split(",")]:
                for k in [int(x) for x in a.consumers.split(",")]:
                    if a.verify:
                        shutil.rmtree(a.verify_dir, ignore_errors=True)
                        os.makedirs(a.verify_dir)
                    # Alternate the order so neither approach always runs first.
                    pair = [run_once(a, approach, n, k, rep)
                            for approach in (approaches if rep % 2 == 0 else approaches[::-1])]
                    if a.verify:
                        exact, lines = verify_frames(a, n, k)
                        for line in lines:
                            log("bench-host: verify N=%d K=%d rep %d: %s" % (n, k, rep, line))
                        for r in pair:
                            r["frames_exact"] = exact
                        verified.append(exact and not any(r["failures"] or r["processes_reporting_loss"]
                                                          for r in pair))
                    for r in pair:
                        record(r)
    print(summarize(runs, a.out))
    if a.verify and not all(verified):
        log("bench-host: --verify FAILED: a process failed or lost frames, or a consumer's frames differ "
            "(the lines above, %s)" % os.path.join(a.out, "logs"))
        sys.exit(1)


if __name__ == "__main__":
    main()
