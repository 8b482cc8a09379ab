#!/usr/bin/env bash
# The deployment files, checked offline:
# - deploy/k8s/*.yaml against the Kubernetes API schemas that kubernetes-validate
#   bundles, strict (an unknown field fails; so does a kind or apiVersion it has no
#   schema for), for Kubernetes 1.34 (the first with DRA's resource.k8s.io/v1) and 1.37
#   (the newest it bundles);
# - docker/compose.yaml against the Compose Specification schema that check-jsonschema
#   vendors (--builtin-schema vendor.compose-spec);
# - what the files promise: containers share only the cuframes runtime directory and
#   the GPU (no hostPID, hostIPC or shareProcessNamespace; no pid: or ipc: in compose,
#   network_mode none), every container mounts the same volume on /run/cuframes, gets
#   a GPU (the same claim, under DRA), NVIDIA_DRIVER_CAPABILITIES, runs as non-root;
#   every container but the exporter has a `cuframes health` liveness probe, and no
#   exec probe times out before health can answer (3 s or more);
#   references (volumes, resource claims, claim templates) resolve;
# - negative checks: broken copies of the files, written to a temporary directory,
#   must be rejected (unknown field, unknown apiVersion, hostPID, a publisher without
#   its probe, compose pid:, a misspelt compose key), so a validator that passes
#   everything is caught.
# Makes a virtualenv (build/venv-manifests, kept between runs) with pinned packages
# from PyPI; no schema is downloaded. The checks run in a network namespace of their
# own with no network (unshare -n) where the machine allows it, else that guarantee
# is counted as skipped. Prints ok/FAILED per check and "N passed, N failed, N
# skipped" last; exits 1 on a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=build/venv-manifests
# Every package in the venv, pinned (kubernetes-validate 1.37.0 bundles the schemas of
# Kubernetes 1.25-1.37; check-jsonschema 0.39.0 vendors the Compose schema).
pins=(
    kubernetes-validate==1.37.0 check-jsonschema==0.39.0
    attrs==26.1.0 certifi==2026.10.19.post1 charset-normalizer==3.5.3 click==8.5.1
    idna==3.20 importlib_resources==7.1.0 jsonschema==4.26.0
    jsonschema-specifications==2025.9.1 packaging==26.4 PyYAML==6.0.4
    referencing==0.37.0 regress==2026.9.1 requests==2.34.2 rpds-py==2026.9.1
    ruamel.yaml==0.19.1 typing_extensions==4.16.0 urllib3==2.8.0
)

if [ ! -x "$venv/bin/python" ]; then
    echo "== $python -m venv $venv"
    if ! "$python" -m venv "$venv"; then
        echo "test-manifests.sh: '$python -m venv' failed (Debian/Ubuntu: apt-get install python3-venv)" >&2
        echo "Manifests: 0 passed, 1 failed, 0 skipped"
        exit 1
    fi
fi
stamp=$venv/.cuframes-pins
if [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ]; then
    echo "== pip install ${pins[0]} ${pins[1]} (and their dependencies, pinned)"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}"
    echo "${pins[*]}" >"$stamp"
fi

# No network for the checks themselves: a new network namespace (root, or an
# unprivileged user namespace), where the machine lets us make one.
offline=()
if unshare -n true 2>/dev/null; then
    offline=(unshare -n)
elif unshare -rn true 2>/dev/null; then
    offline=(unshare -rn)
fi

OFFLINE=${offline[*]:+yes} "${offline[@]}" "$venv/bin/python" - deploy/k8s/*.yaml -- docker/compose.yaml <<'PY'
import copy, os, subprocess, sys, tempfile

import yaml
import kubernetes_validate
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError

K8S_VERSIONS = ["1.34.0", "1.37.0"]
RUN_DIR = "/run/cuframes"
CAPS = "compute,video,utility"
FORBIDDEN = ("hostPID", "hostIPC", "shareProcessNamespace")

args = sys.argv[1:]
manifests, compose_files = args[:args.index("--")], args[args.index("--") + 1:]
results = {"passed": 0, "failed": 0, "skipped": 0}
venv_bin = os.path.dirname(sys.executable)


def report(ok, what, problems=()):
    if ok is None:
        results["skipped"] += 1
        print(f"skipped {what}")
        return
    results["passed" if ok else "failed"] += 1
    print(f"{'ok     ' if ok else 'FAILED '} {what}")
    for p in problems:
        print(f"          {p}")


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def name_of(doc):
    return f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"


# --- Kubernetes: schemas --------------------------------------------------------------

def schema_problems(docs, version):
    """Strict validation of every document; a missing schema is a failure."""
    problems = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            problems.append(f"{name_of(doc)}: {path}: {e.message}")
        except SchemaNotFoundError as e:
            problems.append(f"{name_of(doc)}: no schema: {e.message}")
        except Exception as e:  # a malformed document (no kind, say)
            problems.append(f"{name_of(doc) if isinstance(doc, dict) else doc!r}: {e}")
    return problems


# --- Kubernetes: what the manifests promise ---------------------------------------------

def walk(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{path}.{k}" if path else str(k), k, v
            yield from walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}[{i}]")


def pod_specs(doc):
    spec = doc.get("spec") or {}
    kind = doc.get("kind")
    if kind == "Pod":
        return [spec]
    if kind == "CronJob":
        return [((spec.get("jobTemplate") or {}).get("spec") or {}).get("template", {}).get("spec") or {}]
    if isinstance(spec.get("template"), dict) and "spec" in spec["template"]:
        return [spec["template"]["spec"]]
    return []


def policy_problems(docs, claim_templates):
    problems = []
    shared_claims = {(d.get("metadata") or {}).get("name") for d in docs if d.get("kind") == "ResourceClaim"}
    node_dirs = set()
    for doc in docs:
        for path, key, value in walk(doc):
            if key in FORBIDDEN and value:
                problems.append(f"{name_of(doc)}: {path}: {value!r} (only the runtime directory and the GPU are shared)")
        for spec in pod_specs(doc):
            who = name_of(doc)
            volumes = {v.get("name"): v for v in spec.get("volumes") or []}
            claims = {c.get("name"): c for c in spec.get("resourceClaims") or []}
            for c in claims.values():
                t = c.get("resourceClaimTemplateName")
                if t and t not in claim_templates:
                    problems.append(f"{who}: resourceClaims {c.get('name')}: no ResourceClaimTemplate {t!r} in these files")
                n = c.get("resourceClaimName")
                if n and n not in shared_claims:
                    problems.append(f"{who}: resourceClaims {c.get('name')}: no ResourceClaim {n!r} in these files")
            sc = spec.get("securityContext") or {}
            if sc.get("runAsNonRoot") is not True or sc.get("runAsUser", 0) == 0:
                problems.append(f"{who}: securityContext must set runAsNonRoot: true and a non-zero runAsUser")
            if "fsGroup" not in sc:
                problems.append(f"{who}: securityContext has no fsGroup")
            run_volumes, gpu_claims = set(), set()
            containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
            for c in containers:
                cname = f"{who} container {c.get('name')}"
                mounts = c.get("volumeMounts") or []
                for m in mounts:
                    if m.get("name") not in volumes:
                        problems.append(f"{cname}: volumeMount {m.get('name')!r} names no volume")
                run = [m for m in mounts if m.get("mountPath") == RUN_DIR]
                if not run:
                    problems.append(f"{cname}: nothing mounted on {RUN_DIR}")
                for m in run:
                    run_volumes.add(m.get("name"))
                    vol = volumes.get(m.get("name")) or {}
                    # A Pod's own emptyDir, or (separate Pods on one node) the node's
                    # directory, which must exist: a hostPath of type Directory.
                    node_dir = (vol.get("hostPath") or {}).get("type") == "Directory"
                    if "emptyDir" not in vol and not node_dir:
                        problems.append(f"{cname}: {RUN_DIR} is neither an emptyDir nor a hostPath of type Directory")
                # The exporter reads headers only: no GPU for it.
                exporter = c.get("name") == "exporter"
                env = {e.get("name"): e.get("value") for e in c.get("env") or []}
                if not exporter and env.get("NVIDIA_DRIVER_CAPABILITIES") != CAPS:
                    problems.append(f"{cname}: env NVIDIA_DRIVER_CAPABILITIES is not {CAPS}")
                res = c.get("resources") or {}
                used = [x.get("name") for x in res.get("claims") or []]
                for u in used:
                    if u not in claims:
                        problems.append(f"{cname}: resources.claims {u!r} is not in spec.resourceClaims")
                gpu_claims.update(used)
                if not exporter and "nvidia.com/gpu" not in (res.get("limits") or {}) and not used:
                    problems.append(f"{cname}: no GPU (neither a nvidia.com/gpu limit nor a resource claim)")
                # Probes: every container of a stream (all but the exporter) is restarted
                # when stuck, by `cuframes health`; health may wait 2 s for a header
                # asked for over the socket, so the probe's timeout must allow it.
                if not exporter:
                    live = c.get("livenessProbe") or {}
                    command = (live.get("exec") or {}).get("command") or []
                    if command[:2] != ["cuframes", "health"]:
                        problems.append(f"{cname}: no livenessProbe running `cuframes health`")
                    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                        probe = c.get(kind) or {}
                        if "exec" in probe and probe.get("timeoutSeconds", 1) < 3:
                            problems.append(f"{cname}: {kind} times out after {probe.get('timeoutSeconds', 1)} s (cuframes health may take 2 s)")
                csc = c.get("securityContext") or {}
                if csc.get("privileged") or csc.get("runAsUser") == 0 or csc.get("allowPrivilegeEscalation", True):
                    problems.append(f"{cname}: privileged, root, or allowPrivilegeEscalation not false")
            if len(run_volumes) > 1:
                problems.append(f"{who}: containers mount different volumes on {RUN_DIR}: {sorted(run_volumes)}")
            node_dirs.update((volumes.get(v) or {}).get("hostPath", {}).get("path") for v in run_volumes
                             if "hostPath" in (volumes.get(v) or {}))
            if len(gpu_claims) > 1:
                problems.append(f"{who}: containers use different resource claims (not the same GPU): {sorted(gpu_claims)}")
    if len(node_dirs) > 1:
        problems.append(f"the Pods of one file use different node directories: {sorted(node_dirs)}")
    return problems


def check_k8s_file(path, docs, claim_templates, expect_ok=True, label=None):
    label = label or path
    ok_all = True
    for version in K8S_VERSIONS:
        problems = schema_problems(docs, version)
        kinds = ", ".join(name_of(d) for d in docs)
        if expect_ok:
            report(not problems, f"{label}: Kubernetes {version[:-2]} schema, strict ({kinds})", problems)
        ok_all &= not problems
    try:
        problems = policy_problems(docs, claim_templates)
    except (AttributeError, TypeError, KeyError) as e:  # a document of the wrong shape
        problems = [f"cannot check the sharing rules: {type(e).__name__}: {e}"]
    if expect_ok and not any(pod_specs(d) for d in docs if isinstance(d, dict)):
        report(None, f"{label}: sharing rules: no Pod or Pod template in it")
    elif expect_ok:
        report(not problems, f"{label}: shares only {RUN_DIR} and the GPU; non-root; references resolve; `cuframes health` probes", problems)
    return ok_all, not problems


# --- Compose -----------------------------------------------------------------------------

def compose_schema(path):
    p = subprocess.run([os.path.join(venv_bin, "check-jsonschema"), "--builtin-schema",
                        "vendor.compose-spec", path], capture_output=True, text=True)
    out = (p.stdout + p.stderr).strip().splitlines()
    return p.returncode == 0, [] if p.returncode == 0 else out[-12:]


def compose_policy(doc):
    problems = []
    services = (doc or {}).get("services") or {}
    if not services:
        problems.append("no services")
    for name, svc in services.items():
        svc = svc or {}
        for key in ("pid", "ipc"):
            if key in svc:
                problems.append(f"service {name}: {key}: {svc[key]!r} (only the volume and the GPU are shared)")
        # The exporter is scraped over the network and reads headers only.
        exporter = name == "exporter"
        if not exporter and svc.get("network_mode") != "none":
            problems.append(f"service {name}: network_mode is {svc.get('network_mode')!r}, not none")
        targets = []
        for v in svc.get("volumes") or []:
            if isinstance(v, str):
                parts = v.split(":")
                targets.append(parts[1] if len(parts) > 1 else parts[0])
            elif isinstance(v, dict):
                targets.append(v.get("target"))
        if RUN_DIR not in targets:
            problems.append(f"service {name}: no volume on {RUN_DIR}")
        devices = (((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []
        if not exporter and not any(d.get("driver") == "nvidia" for d in devices):
            problems.append(f"service {name}: no NVIDIA GPU reservation")
    return problems


def check_compose_file(path, label=None, expect_ok=True):
    label = label or path
    ok_schema, problems = compose_schema(path)
    if expect_ok:
        report(ok_schema, f"{label}: Compose Specification schema (check-jsonschema vendor.compose-spec)", problems)
    with open(path) as f:
        doc = yaml.safe_load(f)
    try:
        problems = compose_policy(doc)
    except (AttributeError, TypeError, KeyError) as e:
        problems = [f"cannot check the sharing rules: {type(e).__name__}: {e}"]
    if expect_ok:
        report(not problems, f"{label}: no pid:/ipc:, network_mode none, {RUN_DIR} volume and GPU in every service (the exporter: no GPU, a network)", problems)
    return ok_schema, not problems


# --- The files ---------------------------------------------------------------------------

report(True if os.environ.get("OFFLINE") else None,
       "checks run with no network (own network namespace, unshare -n)"
       + ("" if os.environ.get("OFFLINE") else ": cannot make a network namespace here"))

k8s = {p: load_all(p) for p in manifests}
templates = {(d.get("metadata") or {}).get("name") for docs in k8s.values() for d in docs
             if d.get("kind") == "ResourceClaimTemplate"}
for path, docs in k8s.items():
    check_k8s_file(path, docs, templates)
for path in compose_files:
    check_compose_file(path)

# --- Negative checks: broken copies must be rejected -------------------------------------

def first_pod(docs):
    return next(d for d in docs if d.get("kind") == "Pod")


with tempfile.TemporaryDirectory(prefix="cuframes-manifests-") as tmp:
    def write(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def negative(what, by, rejected):
        report(rejected, f"negative: {what}: {'rejected' if rejected else 'NOT rejected'} by {by}")

    base = next((docs for docs in k8s.values() if any(d.get("kind") == "Pod" for d in docs)), None)
    if base is None:
        report(False, "negative checks: no Pod manifest to break")
    else:
        docs = copy.deepcopy(base)
        first_pod(docs)["spec"]["containers"][0]["imagePullPolicyy"] = "IfNotPresent"
        path = write("unknown-field.yaml", yaml.safe_dump_all(docs))
        ok_schema, _ = check_k8s_file(path, load_all(path), templates, expect_ok=False)
        negative("a Pod with an unknown container field (imagePullPolicyy)", "the Kubernetes schema", not ok_schema)

        docs = copy.deepcopy(base)
        first_pod(docs)["spec"]["containers"] = "publisher"
        path = write("wrong-type.yaml", yaml.safe_dump_all(docs))
        ok_schema, _ = check_k8s_file(path, load_all(path), templates, expect_ok=False)
        negative("a Pod whose containers is a string", "the Kubernetes schema", not ok_schema)

        docs = copy.deepcopy(base)
        first_pod(docs)["apiVersion"] = "v9"
        path = write("unknown-api.yaml", yaml.safe_dump_all(docs))
        ok_schema, _ = check_k8s_file(path, load_all(path), templates, expect_ok=False)
        negative("a Pod of apiVersion v9 (no schema for it)", "the Kubernetes check", not ok_schema)

        docs = copy.deepcopy(base)
        first_pod(docs)["spec"]["containers"][0].pop("livenessProbe", None)
        path = write("no-probe.yaml", yaml.safe_dump_all(docs))
        ok_schema, ok_policy = check_k8s_file(path, load_all(path), templates, expect_ok=False)
        negative("a publisher without a `cuframes health` liveness probe", "the probe check", ok_schema and not ok_policy)

        docs = copy.deepcopy(base)
        first_pod(docs)["spec"]["hostPID"] = True
        path = write("host-pid.yaml", yaml.safe_dump_all(docs))
        ok_schema, ok_policy = check_k8s_file(path, load_all(path), templates, expect_ok=False)
        negative("a Pod with hostPID: true (schema-valid)", "the sharing check", ok_schema and not ok_policy)

    cluster = next((docs for docs in k8s.values() if any(d.get("kind") == "ResourceClaim" for d in docs)), None)
    if cluster is None:
        report(False, "negative checks: no manifest with a shared ResourceClaim to break")
    else:
        docs = copy.deepcopy(cluster)
        first_pod(docs)["spec"]["resourceClaims"][0]["resourceClaimName"] = "no-such-claim"
        path = write("claim-name.yaml", yaml.safe_dump_all(docs))
        ok_schema, ok_policy = check_k8s_file(path, load_all(path), templates, expect_ok=False)
        negative("a Pod naming a ResourceClaim not in the file", "the sharing check", ok_schema and not ok_policy)

        docs = copy.deepcopy(cluster)
        first_pod(docs)["spec"]["volumes"][0]["hostPath"]["path"] = "/run/elsewhere"
        path = write("node-dirs.yaml", yaml.safe_dump_all(docs))
        ok_schema, ok_policy = check_k8s_file(path, load_all(path), templates, expect_ok=False)
        negative("Pods of one file on different node directories", "the sharing check", ok_schema and not ok_policy)

    if compose_files:
        with open(compose_files[0]) as f:
            doc = yaml.safe_load(f)
        bad = copy.deepcopy(doc)
        first, name = list(bad["services"])[0], [n for n in bad["services"] if n != "exporter"][-1]
        bad["services"][name]["pid"] = "service:" + first
        path = write("compose-pid.yaml", yaml.safe_dump(bad))
        ok_schema, ok_policy = check_compose_file(path, expect_ok=False)
        negative(f"compose with pid: on service {name} (schema-valid)", "the sharing check", ok_schema and not ok_policy)

        bad = copy.deepcopy(doc)
        bad["services"][name]["network_mod"] = bad["services"][name].pop("network_mode", "none")
        path = write("compose-typo.yaml", yaml.safe_dump(bad))
        ok_schema, _ = check_compose_file(path, expect_ok=False)
        negative(f"compose with a misspelt key (network_mod) on service {name}", "the Compose schema", not ok_schema)

print(f"Manifests: {results['passed']} passed, {results['failed']} failed, {results['skipped']} skipped")
sys.exit(1 if results["failed"] else 0)
PY
