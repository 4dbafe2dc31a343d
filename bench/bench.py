#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
#
# The one benchmark of issue #13 (run through scripts/bench.sh, which starts the environment):
# kube-scheduler (the environment's, 1.36.2), Slurm alone and `slurm-bridge scheduler` side by
# side, on the same external Slurm nodes (State=External, 64 CPUs, partition `ext`) registered as
# Kubernetes Nodes of the same names. Prints one table: metric | kube-scheduler | Slurm alone |
# bridge | ratio.
#
#   1. Latency on a quiet cluster: one pod (or job) every --interval-ms; per pod, create -> bound
#      (pod watch), and for the bridge's pods the same job's submit -> RUNNING as Slurm shows it
#      (GET /jobs/state/ every 10 ms: first seen -> first seen RUNNING); overhead = the first
#      minus the second.
#   2. Burst: --pods pods created while no scheduler runs; the scheduler is started and the time
#      until every pod has spec.nodeName is taken (pod watch). Slurm alone: the same number of
#      jobs submitted straight to slurmrestd by --concurrency clients, until all are RUNNING.
#   3. CPU (utime+stime from /proc/PID/stat) and peak RSS (VmHWM) of each scheduler over its
#      burst, and the CPU of slurmctld, slurmrestd, kube-apiserver and etcd in each burst phase.
#   4. --scale: the bridge alone, pods in waves, then every pod bound once (jobs tagged by the
#      bridge vs pods), and its slurmrestd requests/s while --waiting pods wait.
#
# Only the standard library: http.client with keep-alive, one connection per thread.
import argparse
import base64
import concurrent.futures
import datetime
import http.client
import json
import multiprocessing
import os
import re
import resource
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

BRIDGE = "slurm-bridge-scheduler"
JOB_ID_LABEL = "scheduler.slinky.slurm.net/slurm-jobid"
FINALIZER = "scheduler.slinky.slurm.net/finalizer"
SLURM_API = "/slurm/v0.0.44"
LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}


def log(*a):
    print(time.strftime("[%H:%M:%S]"), *a, file=sys.stderr, flush=True)


def now():
    return time.monotonic()


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
    return env


class Http:
    """One keep-alive connection per thread to one server; JSON in, JSON out."""

    def __init__(self, url, headers, ca=None):
        u = urllib.parse.urlparse(url)
        self.host, self.port, self.tls = u.hostname, u.port, u.scheme == "https"
        self.headers = headers
        self.ctx = ssl.create_default_context(cafile=ca) if self.tls else None
        self.local = threading.local()

    def connect(self, timeout=120):
        if self.tls:
            return http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                               timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def call(self, method, path, body=None, ctype="application/json", raw_reply=False):
        for attempt in range(3):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = self.connect()
            headers = dict(self.headers)
            data = None
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
                headers["Content-Type"] = ctype
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
                continue
            if raw_reply:
                return resp.status, raw
            try:
                return resp.status, json.loads(raw) if raw else {}
            except ValueError:
                return resp.status, {"raw": raw[:200].decode(errors="replace")}
        raise RuntimeError("unreachable")


def states_of(reply):
    """job id -> first state, from a GET /jobs/state/ reply.
    v0.0.44: {"jobs":[{"job_id":"12","state":["RUNNING"]}]} (the id is a string)."""
    return {int(j["job_id"]): (j.get("state") or j.get("job_state") or ["?"])[0]
            for j in reply.get("jobs", [])}


def poll_job_states(env, stop, out):
    """In a process of its own: every job's state every 10 ms (GET /jobs/state/) until `stop`;
    sends (job id -> first seen live, job id -> first seen RUNNING), monotonic times."""
    with open(env["SLURM_JWT_FILE"]) as f:
        slurm = Http(env["SLURM_REST_URL"], {"X-SLURM-USER-TOKEN": f.read().strip()})
    seen, running = {}, {}
    while not stop.is_set():
        _, obj = slurm.call("GET", SLURM_API + "/jobs/state/")
        t = now()
        for jid, s in states_of(obj).items():
            if s not in LIVE:
                continue
            seen.setdefault(jid, t)
            if s == "RUNNING":
                running.setdefault(jid, t)
        time.sleep(0.01)
    out.send((seen, running))


class PodWatch:
    """Watches one namespace's pods from a resource version; records when each pod is first
    seen bound (monotonic time) and its job-id label."""

    def __init__(self, kube, ns, rv):
        self.kube, self.ns = kube, ns
        self.bound = {}  # name -> monotonic time of the first event with spec.nodeName
        self.job = {}  # name -> job id label
        self.lock = threading.Lock()
        self.rv = rv  # the last resourceVersion seen: a watch that ends is resumed from it
        self.closed = False
        self.open()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def open(self):
        self.conn = self.kube.connect(timeout=3600)
        self.conn.request("GET", f"/api/v1/namespaces/{self.ns}/pods?watch=1&resourceVersion="
                          f"{self.rv}&allowWatchBookmarks=true", headers=self.kube.headers)
        self.resp = self.conn.getresponse()
        if self.resp.status != 200:
            raise RuntimeError(f"watch {self.ns}: HTTP {self.resp.status}")

    def seed(self, pods):
        t = now()
        with self.lock:
            for p in pods:
                self.note(p, t)

    def note(self, pod, t):
        name = pod["metadata"]["name"]
        job = pod["metadata"].get("labels", {}).get(JOB_ID_LABEL)
        if job:
            self.job[name] = job
        if pod["spec"].get("nodeName") and name not in self.bound:
            self.bound[name] = t

    def run(self):
        # The apiserver ends a watch now and then (its timeout, a consumer that fell behind in a
        # burst): resumed from the last resourceVersion, or relisted when that is too old (410).
        while not self.closed:
            try:
                line = self.resp.readline()
            except Exception:  # closed under it by close(), or the connection broke
                line = b""
            if not line:
                if self.closed:
                    return
                try:
                    self.conn.close()
                    self.open()
                except Exception:
                    time.sleep(0.2)
                continue
            t = now()
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            kind = ev.get("type")
            obj = ev.get("object") or {}
            if kind == "ERROR":  # 410 Gone: relist, then watch from the list
                lst = self.kube.call("GET", f"/api/v1/namespaces/{self.ns}/pods")
                with self.lock:
                    for p in lst["items"]:
                        self.note(p, t)
                self.rv = lst["metadata"]["resourceVersion"]
                self.conn.close()
                continue
            rv = obj.get("metadata", {}).get("resourceVersion")
            if rv:
                self.rv = rv
            if kind in ("ADDED", "MODIFIED"):
                with self.lock:
                    self.note(obj, t)

    def count(self):
        with self.lock:
            return len(self.bound)

    def close(self):
        self.closed = True
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (OSError, IndexError):
        return 0


def proc_status_mb(pid, field):
    """A /proc/PID/status memory field (VmHWM, VmRSS) in MB; 0 when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def vm_hwm_mb(pid):
    return proc_status_mb(pid, "VmHWM")


HZ = os.sysconf("SC_CLK_TCK")


def find_process(pid, comm):
    """`pid` or its first descendant named `comm` (supervise.sh records the subshell that
    chroots into the daemon for some of them)."""
    todo = [pid]
    while todo:
        p = todo.pop(0)
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() == comm[:15]:
                    return p
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    log(f"warning: no process {comm} under {pid}; its CPU is left out")
    return pid


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


class Bench:
    def __init__(self, a):
        self.a = a
        self.env = read_env(a.env)
        e = self.env
        with open(e["KUBE_TOKEN_FILE"]) as f:
            ktoken = f.read().strip()
        self.kube = Http(e["KUBE_APISERVER_URL"], {"Authorization": f"Bearer {ktoken}"},
                         e["KUBE_CA_FILE"])
        with open(e["SLURM_JWT_FILE"]) as f:
            stoken = f.read().strip()
        self.slurm = Http(e["SLURM_REST_URL"], {"X-SLURM-USER-TOKEN": stoken})
        self.run_dir = e["SB_ENV_DIR"]
        self.out = a.out
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=a.concurrency)
        self.daemons = {}
        for f in ("kube/pids", "slurm/pids"):
            path = os.path.join(self.run_dir, f)
            if os.path.exists(path):
                with open(path) as fh:
                    for line in fh:
                        name, pid = line.split()
                        if name in ("slurmctld", "slurmrestd", "kube-apiserver", "etcd"):
                            self.daemons[name] = find_process(int(pid), name)
        self.nodes = [f"{a.prefix}{i:04d}" for i in range(a.nodes)]
        self.results = {}
        self.notes = []
        self.webhook = None
        self.webhook_namespaces = []  # more namespaces the webhook matches (starvation mode)

    # --- helpers -------------------------------------------------------------------------
    def pmap(self, fn, items):
        return list(self.pool.map(fn, items))

    def kcall(self, method, path, body=None, ctype="application/json", ok=(200, 201)):
        status, obj = self.kube.call(method, path, body, ctype)
        if status not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {str(obj)[:300]}")
        return obj

    def scall(self, method, path, body=None):
        status, obj = self.slurm.call(method, SLURM_API + path, body)
        if status != 200 or obj.get("errors"):
            raise RuntimeError(f"{method} {path}: HTTP {status}: {str(obj)[:300]}")
        return obj

    def slurm_exec(self, *args):
        subprocess.run([os.path.join(self.a.root, "testenv/slurm/exec.sh"), self.run_dir, *args],
                       check=True, stdout=subprocess.DEVNULL)

    def daemon_cpu(self):
        return {n: cpu_ticks(p) for n, p in self.daemons.items()}

    def apiserver_requests(self):
        """(verb, resource[/subresource]) -> requests answered so far, from kube-apiserver's
        apiserver_request_total (every client: the scheduler's, this benchmark's, the
        controllers' of up.sh if any); {} if /metrics cannot be read."""
        status, raw = self.kube.call("GET", "/metrics", raw_reply=True)
        out = {}
        if status != 200:
            return out
        for line in raw.decode(errors="replace").splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line[:line.rindex("}")]))
            res = labels.get("resource", "")
            if labels.get("subresource"):
                res += "/" + labels["subresource"]
            key = (labels.get("verb", ""), res)
            out[key] = out.get(key, 0) + float(line.split()[-1])
        return out

    def requests_in(self, a0, a1):
        """The requests answered between two apiserver_requests() readings, by verb and
        resource, writes and reads apart (WATCH streams not counted)."""
        d = {k: a1[k] - a0.get(k, 0) for k in a1 if a1[k] - a0.get(k, 0) > 0}
        writes = {k: v for k, v in d.items() if k[0] in ("POST", "PUT", "PATCH", "DELETE")}
        reads = {k: v for k, v in d.items() if k[0] in ("GET", "LIST")}
        return writes, reads

    def job_states(self):
        """job id -> first state, for every job slurmctld knows."""
        _, obj = self.slurm.call("GET", SLURM_API + "/jobs/state/")
        return states_of(obj)

    # --- environment ---------------------------------------------------------------------
    def register_nodes(self, names):
        t0 = now()

        def slurm_node(n):
            self.scall("POST", "/new/node/", {
                "node_conf": f"NodeName={n} NodeAddr=127.0.0.1 NodeHostname={n} CPUs=64 "
                             "RealMemory=262144 State=External Feature=ext"})

        self.pmap(slurm_node, names)
        res = {"cpu": "64", "memory": "262144Mi", "pods": "250"}

        def kube_node(n):
            self.kcall("POST", "/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}})
            ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.kcall("PATCH", f"/api/v1/nodes/{n}/status", {"status": {
                "capacity": res, "allocatable": res,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "registered by bench", "lastHeartbeatTime": ts,
                                "lastTransitionTime": ts}]}}, "application/merge-patch+json")

        self.pmap(kube_node, names)
        log(f"{len(names)} external nodes registered in Slurm and Kubernetes in "
            f"{now() - t0:.1f} s")

    def pod(self, name, sched):
        lim = {"cpu": "1", "memory": "100Mi"}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "annotations": {"slurmjob.slinky.slurm.net/exclusive": "false"}},
            "spec": {"schedulerName": sched, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": lim, "limits": lim}}]}}

    def job(self, name):
        # The shape the bridge submits for one such pod (bridge/translate.cc, external mode,
        # exclusive=false: MCS sharing under the bridge's label, so it shares nodes with the
        # bridge's jobs only).
        return {"job": {"name": name, "partition": "ext", "flags": ["EXTERNAL_JOB"],
                        "current_working_directory": "/tmp", "nodes": "1", "minimum_nodes": 1,
                        "maximum_nodes": 1, "tasks_per_node": 1, "cpus_per_task": 1,
                        "memory_per_node": {"set": True, "number": 100},
                        "shared": ["mcs"], "mcs_label": "kubernetes",
                        "admin_comment": "slurm-bridge bench"}}

    def namespace(self, ns):
        self.kcall("POST", "/api/v1/namespaces",
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                   ok=(200, 201, 409))

    def create_pods(self, ns, names, sched):
        self.pmap(lambda n: self.kcall("POST", f"/api/v1/namespaces/{ns}/pods",
                                       self.pod(n, sched)), names)

    def list_pods(self, ns):
        return self.kcall("GET", f"/api/v1/namespaces/{ns}/pods")

    def clear_pods(self, ns):
        """Deletes every pod of `ns` (finalizers stripped: the scheduler is stopped by now)."""
        pods = self.list_pods(ns)["items"]
        held = [p["metadata"]["name"] for p in pods if p["metadata"].get("finalizers")]
        self.pmap(lambda n: self.kcall(
            "PATCH", f"/api/v1/namespaces/{ns}/pods/{n}", {"metadata": {"finalizers": None}},
            "application/merge-patch+json", ok=(200, 404)), held)
        self.kcall("DELETE", f"/api/v1/namespaces/{ns}/pods?gracePeriodSeconds=0")
        deadline = now() + 120
        while self.list_pods(ns)["items"] and now() < deadline:
            time.sleep(0.5)

    def clear_jobs(self):
        """Cancels every job of partition ext and waits until none is live."""
        self.slurm_exec("scancel", "--partition=ext")
        deadline = now() + 120
        while now() < deadline:
            if not any(s in LIVE for s in self.job_states().values()):
                return
            time.sleep(0.5)
        log("warning: jobs still live after scancel")

    def start_kube_scheduler(self, tag):
        qps = self.a.kube_qps
        cmd = [self.a.kube_scheduler, "--kubeconfig", self.env["KUBECONFIG"],
               "--leader-elect=false", "--secure-port", "0",
               "--kube-api-qps", str(qps), "--kube-api-burst", str(qps)]
        return subprocess.Popen(cmd, stdout=open(f"{self.out}/kube-scheduler-{tag}.log", "w"),
                                stderr=subprocess.STDOUT)

    def start_bridge(self, tag, level="info", command="scheduler", slurm_url=None):
        """`slurm-bridge COMMAND` (scheduler, or all) against slurmrestd, or `slurm_url` (a
        proxy in front of it); its log in bridge-TAG.log."""
        cfg = f"{self.out}/bridge-config.yaml"
        url = slurm_url or self.env["SLURM_REST_URL"]
        with open(cfg, "w") as f:
            f.write(f"schedulerName: {BRIDGE}\nslurmRestApi: {url}\n"
                    f"partition: ext\nmcsLabel: kubernetes\n"
                    f"maxConcurrentSubmits: {self.a.max_concurrent_submits}\n")
            for line in self.a.bridge_config:
                f.write(line + "\n")
        env = dict(os.environ, SLURM_JWT_FILE=self.env["SLURM_JWT_FILE"],
                   KUBECONFIG=self.env["KUBECONFIG"])
        cmd = [self.a.binary, command, "--config", cfg, "--log-level", level,
               "--metrics-bind-address", f"127.0.0.1:{self.a.metrics_port}",
               "--health-probe-bind-address", "0"]
        return subprocess.Popen(cmd, env=env, stdout=open(f"{self.out}/bridge-{tag}.log", "w"),
                                stderr=subprocess.STDOUT)

    def start_webhook(self):
        """`slurm-bridge admission` (TLS, a throw-away CA made with openssl) registered as the
        mutating webhook of the bridge's namespaces only, as the chart registers it for the
        bridge's pods: it sets their finalizer and toleration at CREATE (docs/benchmarks.md).
        kube-scheduler's namespaces are not matched: their creates call no webhook."""
        d = f"{self.out}/webhook"
        os.makedirs(d, exist_ok=True)
        ssl_cmds = [
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt", "-subj", "/CN=bench-ca"],
            ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/tls.key",
             "-out", f"{d}/tls.csr", "-subj", "/CN=127.0.0.1"],
        ]
        for c in ssl_cmds:
            subprocess.run(c, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(f"{d}/san.ext", "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        subprocess.run(["openssl", "x509", "-req", "-in", f"{d}/tls.csr", "-CA", f"{d}/ca.crt",
                        "-CAkey", f"{d}/ca.key", "-CAcreateserial", "-days", "2", "-out",
                        f"{d}/tls.crt", "-extfile", f"{d}/san.ext"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        cfg = f"{d}/config.yaml"
        with open(cfg, "w") as f:
            f.write(f"schedulerName: {BRIDGE}\nslurmRestApi: {self.env['SLURM_REST_URL']}\n"
                    f"partition: ext\nmcsLabel: kubernetes\nmanagedNamespaces: []\n")
        env = dict(os.environ, KUBECONFIG=self.env["KUBECONFIG"])
        self.webhook = subprocess.Popen(
            [self.a.binary, "admission", "--config", cfg, "--bind-address",
             f"127.0.0.1:{port}", "--cert-file", f"{d}/tls.crt", "--key-file", f"{d}/tls.key",
             "--health-probe-bind-address", "0"],
            env=env, stdout=open(f"{self.out}/webhook.log", "w"), stderr=subprocess.STDOUT)
        deadline = now() + 30
        while now() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        with open(f"{d}/ca.crt", "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        namespaces = ["bench-lat-b", "bench-burst-b", "bench-scale"] + self.webhook_namespaces
        self.kcall("POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration", "metadata": {"name": "slurm-bridge-bench"},
            "webhooks": [{
                "name": "pods.bench.slinky.slurm.net", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
                "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate--v1-pod",
                                 "caBundle": ca},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["pods"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "In",
                    "values": namespaces}]}}]}, ok=(200, 201, 409))
        # The apiserver reads webhook configurations through an informer: wait until a create
        # in a matched namespace is mutated.
        self.namespace("bench-lat-b")
        deadline = now() + 30
        while now() < deadline:
            body = self.pod("webhook-probe", BRIDGE)
            got = self.kcall("POST", "/api/v1/namespaces/bench-lat-b/pods?dryRun=All", body)
            if FINALIZER in got["metadata"].get("finalizers", []):
                log(f"webhook: serving on 127.0.0.1:{port} for {', '.join(namespaces)}")
                return
            time.sleep(0.2)
        raise RuntimeError("the webhook did not mutate a dry-run pod within 30 s")

    def webhook_cpu(self):
        return cpu_ticks(self.webhook.pid) / HZ if self.webhook else 0.0

    @staticmethod
    def stop(proc):
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def watch_from_now(self, ns):
        lst = self.list_pods(ns)
        w = PodWatch(self.kube, ns, lst["metadata"]["resourceVersion"])
        w.seed(lst["items"])
        return w

    def wait_bound(self, w, n, timeout, what):
        deadline = now() + timeout
        while w.count() < n:
            if now() > deadline:
                raise RuntimeError(f"{what}: only {w.count()} of {n} pods bound after {timeout} s")
            time.sleep(0.05)
        return now()

    # --- 1. latency ----------------------------------------------------------------------
    def latency_slurm(self):
        n, gap = self.a.latency_pods, self.a.interval_ms / 1000
        submitted, running = {}, {}
        stop = threading.Event()

        def poll():
            while not stop.is_set():
                states = self.job_states()
                t = now()
                for jid, s in states.items():
                    if jid in submitted and s == "RUNNING" and jid not in running:
                        running[jid] = t
                time.sleep(0.01)

        th = threading.Thread(target=poll, daemon=True)
        th.start()
        for i in range(n):
            t0 = now()
            jid = self.scall("POST", "/job/submit", self.job(f"lat-slurm-{i}"))["job_id"]
            submitted[jid] = t0
            time.sleep(max(0.0, t0 + gap - now()))
        deadline = now() + 120
        while len(running) < n and now() < deadline:
            time.sleep(0.05)
        stop.set()
        th.join()
        ms = [(running[j] - submitted[j]) * 1000 for j in running]
        self.results["lat_slurm"] = ms
        log(f"latency, Slurm alone: {len(ms)}/{n} RUNNING, p50 {pct(ms, .5):.0f} ms")
        self.clear_jobs()

    def latency_pods(self, ns, sched, proc_tag, poll_slurm):
        n, gap = self.a.latency_pods, self.a.interval_ms / 1000
        self.namespace(ns)
        w = self.watch_from_now(ns)
        # A warm-up pod: the scheduler has synced and serves before the timed pods.
        self.create_pods(ns, ["warmup"], sched)
        self.wait_bound(w, 1, 120, f"{proc_tag} warm-up")
        # Slurm's side is watched by a process of its own: in a thread its JSON parsing held the
        # GIL (5 ms switch interval) while this process timed creates and pod events, which
        # added up to ~10 ms to the bridge's measured create -> bound.
        before = set(self.job_states()) if poll_slurm else set()
        ctx = multiprocessing.get_context("spawn")  # no fork of this threaded process
        stop = ctx.Event()
        out_r, out_w = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=poll_job_states, args=(self.env, stop, out_w), daemon=True)
        if poll_slurm:
            proc.start()
            time.sleep(0.5)
        created = {}
        wall_offset = time.time() - now()  # monotonic -> wall clock, for the bridge's log
        for i in range(n):
            name = f"lat-{i:04d}"
            t0 = now()
            self.kcall("POST", f"/api/v1/namespaces/{ns}/pods", self.pod(name, sched))
            created[name] = t0
            time.sleep(max(0.0, t0 + gap - now()))
        self.wait_bound(w, n + 1, 180, f"{proc_tag} latency")
        stop.set()
        seen, running = {}, {}
        if poll_slurm:
            seen, running = out_r.recv()
            proc.join()
        w.close()
        bound = {p: (w.bound[p] - created[p]) * 1000 for p in created}
        self.lat_times = {p: (created[p] + wall_offset, w.bound[p] + wall_offset)
                          for p in created}
        over, slurm_ms = [], {}
        if poll_slurm:
            for p in created:
                jid = int(w.job.get(p, 0))
                if jid in seen and jid in running and jid not in before:
                    slurm_ms[p] = (running[jid] - seen[jid]) * 1000
                    over.append(bound[p] - slurm_ms[p])
            if len(over) < n:
                self.notes.append(f"latency: {n - len(over)} of the bridge's pods had no job "
                                  "seen by the 10 ms poll (left out of the overhead)")
        return bound, over, slurm_ms

    def latency(self):
        self.latency_slurm()
        ks = self.start_kube_scheduler("latency")
        try:
            k, _, _ = self.latency_pods("bench-lat-k", "default-scheduler", "kube-scheduler",
                                        False)
        finally:
            self.stop(ks)
        self.results["lat_kube"] = list(k.values())
        self.clear_pods("bench-lat-k")
        log(f"latency, kube-scheduler: p50 {pct(self.results['lat_kube'], .5):.0f} ms")
        # At debug level the bridge logs each bound job's stages (docs/operations.md, "Logs").
        br = self.start_bridge("latency", "debug")
        try:
            b, over, sl = self.latency_pods("bench-lat-b", BRIDGE, "bridge", True)
        finally:
            self.stop(br)
        self.results["lat_bridge"], self.results["lat_over"] = list(b.values()), over
        self.results["lat_bridge_slurm"] = list(sl.values())
        self.results["lat_stages"] = self.stages(f"{self.out}/bridge-latency.log", b, sl)
        log(f"latency, bridge: p50 {pct(b.values(), .5):.0f} ms, "
            f"overhead p50 {pct(over, .5):.0f} ms")
        self.clear_pods("bench-lat-b")
        self.clear_jobs()

    def stages(self, path, bound, slurm_ms):
        """Splits the bridge's overhead per pod with its stage trace ("[2026-12-02 06:15:29.041]
        [debug] Pod/ns/name: Slurm job 12 stages: pod seen -6 ms, submit sent -6 ms, submitted
        +0 ms, RUNNING seen +640 ms, bind began +640 ms, nodes read +644 ms, 1 pod(s) labelled
        and bound +652 ms"): create -> submitted (the bound time seen here minus the trace's
        total), Slurm's RUNNING -> the bridge sees it (its RUNNING seen minus the job's submit
        -> RUNNING seen here), RUNNING seen -> bound, and the steps between. The log's wall-clock
        time (ms) places the bridge's first watch event and its Binding's answer against this
        script's create and watch event."""
        pat = re.compile(r"\[(\S+ \S+)\] \[debug\] Pod/[^/]+/(\S+): Slurm job \d+ stages: "
                         r"(?:pod seen -(\d+) ms, submit sent -(\d+) ms, )?submitted \+0 ms, "
                         r"RUNNING seen \+(-?\d+) ms, (?:bind began \+(\d+) ms, nodes read "
                         r"\+(\d+) ms, )?\d+ pod\(s\) labelled and bound \+(\d+) ms")
        keys = ("submit", "seen", "bind", "watch", "bridge", "slurm", "began", "read", "bound",
                "observed")
        out = {k: [] for k in keys}
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            return out
        times = getattr(self, "lat_times", {})
        for stamp, name, pod_seen, sent, seen, began, read, total in pat.findall(text):
            seen, total = int(seen), int(total)
            if name not in bound or seen < 0:
                continue
            out["submit"].append(bound[name] - total)
            out["bind"].append(total - seen)
            if name in slurm_ms:
                out["seen"].append(seen - slurm_ms[name])
            if began:
                out["began"].append(int(began) - seen)
                out["read"].append(int(read) - int(began))
                out["bound"].append(total - int(read))
            logged = None
            try:
                logged = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
            except ValueError:
                pass
            if pod_seen and logged is not None and name in times:
                # create -> submitted, split: the create and the bridge's watch event (wall
                # clocks of this script and of the bridge's log); the bridge until it sends the
                # submit; the submit's round trip. And the Binding's answer -> this script's
                # watch event of the bound pod.
                created, observed = times[name]
                submitted = logged - total / 1000
                out["watch"].append((submitted - int(pod_seen) / 1000 - created) * 1000)
                out["bridge"].append(int(pod_seen) - int(sent))
                out["slurm"].append(int(sent))
                out["observed"].append((observed - logged) * 1000)
        return out

    # --- 2./3. burst ---------------------------------------------------------------------
    def burst_slurm(self):
        n = self.a.pods
        c0, t0, m0 = self.daemon_cpu(), now(), time.process_time()
        ids = self.pmap(lambda i: self.scall("POST", "/job/submit",
                                             self.job(f"burst-slurm-{i}"))["job_id"], range(n))
        submitted = now()
        want = set(ids)
        deadline = now() + 600
        while now() < deadline:
            states = self.job_states()
            if all(states.get(j) == "RUNNING" for j in want):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("burst, Slurm alone: not all jobs RUNNING after 600 s")
        t1 = now()
        c1, m1 = self.daemon_cpu(), time.process_time()
        r = {"wall": t1 - t0, "submit": submitted - t0, "bound": n,
             "daemons": {k: (c1[k] - c0[k]) / HZ for k in c1}, "bench_cpu": m1 - m0}
        self.results["burst_slurm"] = r
        log(f"burst, Slurm alone: {n} jobs RUNNING in {r['wall']:.1f} s "
            f"(submitted in {r['submit']:.1f} s)")
        self.clear_jobs()

    def burst_sched(self, tag, ns, sched, start):
        n = self.a.pods
        self.namespace(ns)
        names = [f"b-{i:05d}" for i in range(n)]
        time.sleep(1)
        t, cc0, wc0 = now(), self.daemon_cpu(), self.webhook_cpu()
        self.create_pods(ns, names, sched)
        time.sleep(1)  # the apiserver settles after the creates
        cc1, wc1 = self.daemon_cpu(), self.webhook_cpu()
        # The creates' cost where the server side differs: kube-apiserver, etcd and the webhook
        # (the bridge's pods only).
        create = {k: (cc1[k] - cc0[k]) / HZ for k in ("kube-apiserver", "etcd") if k in cc1}
        create["webhook"] = wc1 - wc0
        log(f"burst, {tag}: {n} pods created in {now() - t - 1:.1f} s (CPU s: " +
            ", ".join(f"{k} {v:.2f}" for k, v in create.items()) + "); starting the scheduler")
        w = self.watch_from_now(ns)
        time.sleep(1)  # the apiserver settles after the creates
        a0 = self.apiserver_requests()
        c0, t0, m0 = self.daemon_cpu(), now(), time.process_time()
        proc = start()
        try:
            t1 = self.wait_bound(w, n, 900, f"burst, {tag}")
            c1, m1 = self.daemon_cpu(), time.process_time()
            a1 = self.apiserver_requests()
            cpu = cpu_ticks(proc.pid) / HZ
            rss = vm_hwm_mb(proc.pid)
            sent = None  # requests the scheduler sent until all were bound
            slurm_sent = None  # of which to slurmrestd
            opened = {}  # the bridge's connections opened, by server
            if sched == BRIDGE:  # its counters and request durations, for a reader of the logs
                text = self.bridge_metrics()
                with open(f"{self.out}/bridge-burst-metrics.txt", "w") as f:
                    f.write(text)
                by_server = self.samples(text, "slurm_bridge_client_requests_total")
                sent = sum(by_server.values())
                slurm_sent = by_server.get("slurmrestd", 0.0)
                polls = sum(self.samples(text, "slurm_bridge_job_state_polls_total").values())
                log(f"burst, {tag}: slurmrestd requests {slurm_sent:.0f}, of which state polls "
                    f"{polls:.0f} and submits {self.value(text, 'slurm_bridge_jobs_submitted_total'):.0f}"
                    " (the rest: job layouts, node and job lists)")
                opened = self.samples(text, "slurm_bridge_client_connections_opened_total")
        finally:
            self.stop(proc)
            w.close()
        # Written by the scheduler, before it exits, after the pods were bound.
        scheduled = len(self.kcall(
            "GET", f"/api/v1/namespaces/{ns}/events?fieldSelector=reason%3DScheduled")["items"])
        writes, reads = self.requests_in(a0, a1)
        if sent is None:  # kube-scheduler: what the apiserver answered (this script sent none)
            sent = sum(writes.values()) + sum(reads.values())
        r = {"wall": t1 - t0, "bound": n, "cpu": cpu, "rss": rss,
             "daemons": {k: (c1[k] - c0[k]) / HZ for k in c1}, "bench_cpu": m1 - m0,
             "writes": writes, "reads": reads, "scheduled_events": scheduled, "sent": sent,
             "slurm_sent": slurm_sent, "create": create}
        log(f"burst, {tag}: {n} pods bound in {r['wall']:.1f} s, CPU {cpu:.2f} s, "
            f"RSS {rss:.0f} MB; {scheduled} Scheduled Events; " +
            "".join(f"{v:.0f} connections opened to {k}; " for k, v in sorted(opened.items())) +
            "apiserver writes until all bound: " +
            (", ".join(f"{v:.0f} {k[0]} {k[1]}" for k, v in sorted(writes.items())) or "none") +
            "; reads: " +
            (", ".join(f"{v:.0f} {k[0]} {k[1]}" for k, v in sorted(reads.items())) or "none"))
        self.clear_pods(ns)
        return r

    def wait_forgotten(self):
        """Waits (up to --forget-timeout s) until slurmctld has purged every ended job: a job is kept for
        MinJobAge (60 s in up.sh's slurm.conf) and purged by a pass about once a minute. The
        bridge reads the whole job list when it starts, and Slurm's passes walk it too, so each
        Slurm phase starts from an empty job list."""
        t0 = now()
        while self.job_states() and now() < t0 + self.a.forget_timeout:
            time.sleep(1)
        left = len(self.job_states())
        log(f"Slurm's job list emptied in {now() - t0:.0f} s" if not left else
            f"{left} ended jobs still in Slurm's job list after {now() - t0:.0f} s")

    def burst(self):
        # kube-scheduler first: it needs no Slurm, while slurmctld forgets the latency phase's jobs.
        self.results["burst_kube"] = self.burst_sched(
            "kube-scheduler", "bench-burst-k", "default-scheduler",
            lambda: self.start_kube_scheduler("burst"))
        self.wait_forgotten()
        self.results["burst_bridge"] = self.burst_sched(
            "bridge", "bench-burst-b", BRIDGE, lambda: self.start_bridge("burst"))
        self.clear_jobs()
        self.wait_forgotten()
        self.burst_slurm()

    def bridge_only(self):
        runs = []  # (p50, p99) of the overhead, per latency run
        for i in range(self.a.latency_runs):
            br = self.start_bridge("latency", "debug")
            try:
                b, over, sl = self.latency_pods("bench-lat-b", BRIDGE, "bridge", True)
            finally:
                self.stop(br)
            st = self.stages(f"{self.out}/bridge-latency.log", b, sl)
            runs.append((pct(over, .5), pct(over, .99)))
            log(f"latency run {i + 1}: overhead p50 {runs[-1][0]:.1f} ms, p99 {runs[-1][1]:.1f} ms")
            self.clear_pods("bench-lat-b")
            self.clear_jobs()
        self.wait_forgotten()
        r = self.burst_sched("bridge", "bench-burst-b", BRIDGE, lambda: self.start_bridge("burst"))
        self.clear_jobs()
        n = self.a.pods
        each = "; ".join(f"{p50:.1f}/{p99:.1f}" for p50, p99 in runs)
        return "\n".join([
            f"latency: overhead p50/p99 ms of each of {len(runs)} run(s): {each} (goal: p50 <= 30,"
            f" p99 <= 100 in every run)",
            f"latency (last run): create->bound p50 {pct(b.values(), .5):.1f} ms, overhead p50 "
            f"{pct(over, .5):.1f} / p99 {pct(over, .99):.1f} ms; stages p50: create->submitted "
            f"{pct(st['submit'], .5):.1f} (create+watch {pct(st['watch'], .5):.1f}, bridge "
            f"{pct(st['bridge'], .5):.1f}, submit {pct(st['slurm'], .5):.1f}), RUNNING->seen "
            f"{pct(st['seen'], .5):.1f}, seen->bound {pct(st['bind'], .5):.1f} (worker "
            f"{pct(st['began'], .5):.1f}, nodes {pct(st['read'], .5):.1f}, bind "
            f"{pct(st['bound'], .5):.1f}), Binding->watch here {pct(st['observed'], .5):.1f} ms",
            f"burst: {n} pods in {r['wall']:.2f} s ({n / r['wall']:.0f} pods/s), CPU "
            f"{r['cpu'] * 1000 / n:.2f} ms per pod, RSS {r['rss']:.0f} MB; daemons' CPU s: " +
            ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["daemons"].items()))])

    # --- table ---------------------------------------------------------------------------
    def table(self):
        r = self.results
        rows = []

        def row(metric, k, s, b, goal=None, of_slurm=False):
            ratio, of = None, ""
            if b is not None and k not in (None, 0) and not of_slurm:
                ratio = b / k
            elif b is not None and s not in (None, 0):
                ratio, of = b / s, "*"
            rows.append((metric, k, s, b, ratio, of, goal))

        if "lat_kube" in r:
            lk, ls, lb, lo = r["lat_kube"], r["lat_slurm"], r["lat_bridge"], r["lat_over"]
            row("latency: create->bound ms, p50 (Slurm: submit->RUNNING)",
                pct(lk, .5), pct(ls, .5), pct(lb, .5))
            row("latency: create->bound ms, p99 (Slurm: submit->RUNNING)",
                pct(lk, .99), pct(ls, .99), pct(lb, .99))
            row("latency: its job's submit->RUNNING ms, p50", None,
                None, pct(r["lat_bridge_slurm"], .5))
            row("latency: bridge overhead ms, p50 (goal <= 30)", None, None, pct(lo, .5))
            row("latency: bridge overhead ms, p99 (goal <= 100)", None, None, pct(lo, .99))
            st = r["lat_stages"]
            if st["bind"]:
                row("latency: overhead stage, create->submitted ms, p50", None, None,
                    pct(st["submit"], .5))
                if st["watch"]:
                    row("  of which: create -> the bridge's watch event ms, p50", None, None,
                        pct(st["watch"], .5))
                    row("  of which: watch event -> submit sent ms, p50", None, None,
                        pct(st["bridge"], .5))
                    row("  of which: the submit's round trip ms, p50", None, None,
                        pct(st["slurm"], .5))
                row("latency: overhead stage, RUNNING->bridge sees it ms, p50", None, None,
                    pct(st["seen"], .5))
                row("latency: overhead stage, bridge sees RUNNING->bound ms, p50", None, None,
                    pct(st["bind"], .5))
                if st["began"]:
                    row("  of which: RUNNING seen -> a worker begins the bind ms, p50", None,
                        None, pct(st["began"], .5))
                    row("  of which: its nodes read from Slurm (layout) ms, p50", None, None,
                        pct(st["read"], .5))
                    row("  of which: labelled if need be and bound (Binding) ms, p50", None,
                        None, pct(st["bound"], .5))
                if st["observed"]:
                    row("latency: Binding answered -> this script's watch event ms, p50", None,
                        None, pct(st["observed"], .5))
        if "burst_bridge" in r:
            bk, bs, bb = r["burst_kube"], r["burst_slurm"], r["burst_bridge"]
            n = self.a.pods
            row(f"burst: {n} pods on {self.a.nodes} nodes, s to all bound (Slurm: RUNNING)",
                bk["wall"], bs["wall"], bb["wall"])
            row("burst: pods/s", n / bk["wall"], n / bs["wall"], n / bb["wall"])
            row("burst: scheduler CPU s", bk["cpu"], None, bb["cpu"])
            row("burst: scheduler CPU ms per bound pod (goal ratio <= 0.5)",
                bk["cpu"] * 1000 / n, None, bb["cpu"] * 1000 / n)
            row("burst: scheduler peak RSS MB (VmHWM)", bk["rss"], None, bb["rss"])
            for d in ("slurmctld", "slurmrestd", "kube-apiserver", "etcd"):
                if d in bb["daemons"]:
                    row(f"burst: {d} CPU s in the phase", bk["daemons"][d], bs["daemons"][d],
                        bb["daemons"][d], of_slurm=d.startswith("slurm"))
            self.burst_floor(row, bk, bs, bb, n)
        width = max(len(x[0]) for x in rows)
        fmt = lambda v: "-" if v is None else (f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}")
        lines = [f"{'metric':<{width}} | {'kube-scheduler':>14} | {'Slurm alone':>11} | "
                 f"{'bridge':>9} | {'ratio':>6}"]
        for metric, k, s, b, ratio, of, _ in rows:
            lines.append(f"{metric:<{width}} | {fmt(k):>14} | {fmt(s):>11} | {fmt(b):>9} | "
                         f"{(fmt(ratio) + of) if ratio is not None else '-':>6}")
        return "\n".join(lines)

    @staticmethod
    def burst_floor(row, bk, bs, bb, n):
        """Rows that say what bounds the burst on this machine, where every process shares the
        same cores: the apiserver's writes per pod, the CPU of all processes, and the floor: the
        time the bridge's burst would take if its pods cost the apiserver and etcd no more than
        kube-scheduler's did and Slurm no more than Slurm alone's jobs did, with the bridge's
        own CPU as measured, at the rate the cores were busy in kube-scheduler's burst."""
        writes = lambda r: sum(r["writes"].values()) / n
        if bk.get("writes") and bb.get("writes"):
            row("burst: apiserver writes per pod until all bound", writes(bk), None, writes(bb))
        if bk.get("sent") and bb.get("sent"):
            row("burst: scheduler's requests per pod (bridge: apiserver and slurmrestd)",
                bk["sent"] / n, None, bb["sent"] / n)
            row("burst: scheduler CPU us per request", bk["cpu"] * 1e6 / bk["sent"], None,
                bb["cpu"] * 1e6 / bb["sent"])
        if "scheduled_events" in bb:
            row("burst: Scheduled Events written (by the scheduler's exit)",
                bk["scheduled_events"], None, bb["scheduled_events"])
        if bb.get("slurm_sent") is not None:
            row("burst: Slurm requests per pod (goal <= 1.3; Slurm alone: its submit)", None,
                1.0, bb["slurm_sent"] / n, of_slurm=True)
        if "create" in bb and "create" in bk:
            ck, cb = sum(bk["create"].values()), sum(bb["create"].values())
            row("create: kube-apiserver + etcd + webhook CPU s for the pods' creates", ck,
                None, cb)
            # Goal 1: every process's CPU per bound pod against the sum of the two halves,
            # measured in this run. The bridge's: its own, kube-apiserver, etcd, slurmctld and
            # slurmrestd in its burst, plus what its pods' creates cost more than
            # kube-scheduler's (the webhook). The reference: kube-scheduler's burst (scheduler,
            # kube-apiserver, etcd) plus Slurm alone's burst (slurmctld, slurmrestd).
            sysd = ("kube-apiserver", "etcd", "slurmctld", "slurmrestd")
            ref = (bk["cpu"] + bk["daemons"].get("kube-apiserver", 0) + bk["daemons"].get("etcd", 0)
                   + bs["daemons"].get("slurmctld", 0) + bs["daemons"].get("slurmrestd", 0))
            mine = bb["cpu"] + sum(bb["daemons"].get(d, 0) for d in sysd) + (cb - ck)
            row("system cost: CPU ms per pod (kube-scheduler column: it + Slurm alone; goal "
                "ratio <= 1.25)", ref * 1000 / n, None, mine * 1000 / n)
        total = lambda r, sched: sum(r["daemons"].values()) + r["bench_cpu"] + sched
        k_all, s_all, b_all = total(bk, bk["cpu"]), total(bs, 0), total(bb, bb["cpu"])
        row("burst: CPU s of all processes (daemons, scheduler, benchmark)", k_all, s_all, b_all)
        row("burst: cores busy (CPU of all processes / wall)", k_all / bk["wall"],
            s_all / bs["wall"], b_all / bb["wall"])
        slurm = sum(v for k, v in bs["daemons"].items() if k.startswith("slurm"))
        floor = (k_all - bk["cpu"] + slurm + bb["cpu"]) / (k_all / bk["wall"])
        row("burst: floor for the bridge on this machine, s (docs/benchmarks.md)",
            None, None, floor)
        row("burst: best pods/s ratio that floor allows", None, None, bk["wall"] / floor)

    # --- 4. scale ------------------------------------------------------------------------
    def live_bridge_jobs(self):
        """(job, its tag) of every live Slurm job the bridge tagged (admin_comment), from the
        full job list."""
        _, obj = self.slurm.call("GET", SLURM_API + "/jobs/")
        out = []
        for j in obj.get("jobs", []):
            state = (j.get("job_state") or ["?"])[0]
            try:
                tag = json.loads(j.get("admin_comment") or "null")
            except ValueError:
                tag = None
            if state in LIVE and isinstance(tag, dict) and "slurm-bridge" in tag:
                out.append((j, tag))
        return out

    def bound_once_without_the_list(self, pods):
        """Every pod bound exactly once, checked without Slurm's whole job list (issue #46):
        (live jobs among the pods' distinct job-id labels, from GET /jobs/state/?job_id=...,
        1,000 ids a request; CPUs Slurm allocated on the partition ext's nodes, from GET
        /nodes/). Each pod's job holds one CPU there and nothing else runs there, so a second
        job for a pod shows as allocated CPUs beyond the bound pods."""
        ids = set()
        for p in pods:
            v = p["metadata"].get("labels", {}).get(JOB_ID_LABEL, "")
            if v.isdigit():
                ids.add(int(v))
        ids = sorted(ids)
        states = {}
        for i in range(0, len(ids), 1000):
            q = "&".join(f"job_id={j}" for j in ids[i:i + 1000])
            _, obj = self.slurm.call("GET", SLURM_API + "/jobs/state/?" + q)
            states.update(states_of(obj))
        live = sum(1 for j in ids if states.get(j) in LIVE)
        _, obj = self.slurm.call("GET", SLURM_API + "/nodes/")
        alloc = sum(int(n.get("alloc_cpus") or 0) for n in obj.get("nodes", [])
                    if "ext" in (n.get("partitions") or []))
        return live, alloc

    def bridge_metrics(self):
        """The bridge's /metrics text."""
        conn = http.client.HTTPConnection("127.0.0.1", self.a.metrics_port, timeout=10)
        conn.request("GET", "/metrics")
        body = conn.getresponse().read().decode()
        conn.close()
        return body

    @staticmethod
    def samples(text, name):
        """label values -> value of the samples of metric `name` (one label) in /metrics text."""
        return {line[line.index('"') + 1:line.rindex('"')]: float(line.split()[-1])
                for line in text.splitlines() if line.startswith(name + "{")}

    @staticmethod
    def value(text, name):
        """The value of the unlabelled sample `name` in /metrics text (nan when absent)."""
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return float("nan")

    def metric(self, sample):
        """The value of `sample` (name{labels}) on the bridge's /metrics."""
        for line in self.bridge_metrics().splitlines():
            if line.startswith(sample + " "):
                return float(line.split()[-1])
        return float("nan")

    def metrics_requests(self):
        return self.metric('slurm_bridge_client_requests_total{server="slurmrestd"}')

    def scale(self):
        a, ns = self.a, "bench-scale"
        self.namespace(ns)
        w = self.watch_from_now(ns)
        c0, t0 = self.daemon_cpu(), now()
        br = self.start_bridge("scale")
        out = {}
        try:
            done = 0
            for wave in range(0, a.pods, a.wave):
                names = [f"s-{i:05d}" for i in range(wave, min(a.pods, wave + a.wave))]
                tw = now()
                self.create_pods(ns, names, BRIDGE)
                done += len(names)
                self.wait_bound(w, done, 1800, f"scale wave at {wave}")
                log(f"scale: {done} pods bound (wave of {len(names)} in {now() - tw:.1f} s)")
            t1 = now()
            c1 = self.daemon_cpu()
            out["wall"] = t1 - t0
            out["bridge_cpu"] = cpu_ticks(br.pid) / HZ
            out["daemons"] = {k: (c1[k] - c0[k]) / HZ for k in c1}
            # Every pod bound exactly once, without Slurm's whole job list (issue #46 goal 3).
            pods = self.list_pods(ns)["items"]
            bound = sum(1 for p in pods if p["spec"].get("nodeName"))
            jobs_on_pods = {p["metadata"].get("labels", {}).get(JOB_ID_LABEL) for p in pods}
            live, alloc = self.bound_once_without_the_list(pods)
            out.update(pods=len(pods), bound=bound, live=live, alloc=alloc,
                       distinct_job_labels=len(jobs_on_pods - {None}))
            out["rss_bound"] = vm_hwm_mb(br.pid)
            # The bridge's own invariant check (`slurm-bridge check`, docs/operations.md), once.
            chk = subprocess.run(
                [a.binary, "check", "--config", f"{self.out}/bridge-config.yaml", "-n", ns,
                 "--settle", "0"], capture_output=True, text=True,
                env=dict(os.environ, SLURM_JWT_FILE=self.env["SLURM_JWT_FILE"],
                         KUBECONFIG=self.env["KUBECONFIG"]))
            with open(f"{self.out}/check-scale.log", "w") as f:
                f.write(chk.stdout + chk.stderr)
            lines = [x for x in chk.stdout.splitlines() if x.strip()]
            out["check"] = (f"exit {chk.returncode}, " +
                            ("no violations" if chk.returncode == 0 else
                             f"{len(lines)} line(s), first: {lines[0][:120] if lines else ''}"))
            # Steady cost: `waiting` pods wait in Slurm's queue (partition ext down).
            self.slurm_exec("scontrol", "update", "partitionname=ext", "state=down")
            wns = "bench-scale-wait"
            self.namespace(wns)
            submitted = self.metric("slurm_bridge_jobs_submitted_total")
            self.create_pods(wns, [f"w-{i:05d}" for i in range(a.waiting)], BRIDGE)
            # Every waiting pod has its job (the job-id label comes only with the Binding).
            deadline = now() + 600
            while now() < deadline:
                if self.metric("slurm_bridge_jobs_submitted_total") - submitted >= a.waiting:
                    break
                time.sleep(1)
            else:
                self.notes.append("scale: not every waiting pod had its job after 600 s")
            # Past bridge::kLongPending (30 s): the jobs are asked every pendingJobPollInterval.
            time.sleep(35)
            q0, c0, t0 = self.metrics_requests(), self.daemon_cpu(), now()
            b0 = cpu_ticks(br.pid)
            time.sleep(a.window)
            q1, c1, t1 = self.metrics_requests(), self.daemon_cpu(), now()
            out["wait_rps"] = (q1 - q0) / (t1 - t0)
            out["wait_bridge_cpu"] = (cpu_ticks(br.pid) - b0) / HZ / (t1 - t0)
            out["wait_daemons"] = {k: (c1[k] - c0[k]) / HZ / (t1 - t0) for k in c1}
            out["rss"] = vm_hwm_mb(br.pid)
            out["restd_rss"] = vm_hwm_mb(self.daemons["slurmrestd"]) \
                if "slurmrestd" in self.daemons else float("nan")
            self.slurm_exec("scontrol", "update", "partitionname=ext", "state=up")
        finally:
            self.stop(br)
            w.close()
        self.results["scale"] = out
        s = out
        lines = [
            f"scale: {a.nodes} external nodes, {a.pods} pods in waves of {a.wave}",
            f"  all bound in {s['wall']:.1f} s ({a.pods / s['wall']:.1f} pods/s); pods {s['pods']}, "
            f"bound {s['bound']}, distinct job-id labels {s['distinct_job_labels']}, live jobs "
            f"among them {s['live']} (GET /jobs/state/), CPUs allocated on ext's nodes "
            f"{s['alloc']} (one per pod: more is a second job; no whole job list read)",
            f"  slurm-bridge check -n {'bench-scale'}: {s['check']}",
            f"  bridge CPU {s['bridge_cpu']:.1f} s ({s['bridge_cpu'] * 1000 / a.pods:.2f} ms per "
            f"pod), peak RSS {s['rss_bound']:.0f} MB after binding, {s['rss']:.0f} MB at the end; "
            f"slurmrestd peak RSS {s['restd_rss']:.0f} MB",
            "  daemons' CPU s while binding: " +
            ", ".join(f"{k} {v:.1f}" for k, v in sorted(s["daemons"].items())),
            f"  {a.waiting} pods waiting (partition down), over {a.window} s: "
            f"{s['wait_rps']:.2f} slurmrestd requests/s, bridge {s['wait_bridge_cpu'] * 100:.1f}"
            "% of a core; " + ", ".join(f"{k} {v * 100:.1f}%"
                                         for k, v in sorted(s["wait_daemons"].items())),
        ]
        return "\n".join(lines)


def arg_parser():
    """bench.py's options (bench.sh passes them to bench/starvation.py too, which adds its own)."""
    p = argparse.ArgumentParser()
    p.add_argument("--env", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--binary", required=True)
    p.add_argument("--kube-scheduler", required=True)
    p.add_argument("--mode", choices=["default", "scale", "bridge"], default="default",
                   help="bridge: the bridge's latency and burst phases only (no table; for "
                   "trying a change quickly)")
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--latency-pods", type=int, default=100)
    p.add_argument("--latency-runs", type=int, default=1,
                   help="--mode bridge: the latency phase this many times (a bridge each)")
    p.add_argument("--interval-ms", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--kube-qps", type=int, default=1000)
    p.add_argument("--max-concurrent-submits", type=int, default=16)
    p.add_argument("--forget-timeout", type=int, default=150)
    p.add_argument("--bridge-config", action="append", default=[],
                   help="a line added to the bridge's config.yaml, e.g. 'jobListInterval: 10m'")
    p.add_argument("--metrics-port", type=int, required=True)
    p.add_argument("--prefix", default="bx")
    p.add_argument("--wave", type=int, default=2000)
    p.add_argument("--waiting", type=int, default=1000)
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--no-webhook", dest="webhook", action="store_false",
                   help="no mutating webhook: the bridge patches its pods' finalizer and "
                   "toleration after the submit")
    return p


def main():
    p = arg_parser()
    a = p.parse_args()
    # SIGTERM (bench.sh stopped, a ctest timeout) unwinds through the phases' `finally`, which
    # stop the schedulers this script started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    b = Bench(a)
    b.register_nodes(b.nodes)
    try:
        if a.webhook:
            b.start_webhook()
        if a.mode == "scale":
            text = b.scale()
        elif a.mode == "bridge":
            text = b.bridge_only()
        else:
            b.latency()
            b.burst()
            text = b.table()
    finally:  # also when a phase fails: the webhook is this script's process
        if b.webhook:
            b.stop(b.webhook)
    report(text, b.notes)


def report(text, notes):
    """Prints a benchmark's table, its notes and this script's own CPU."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(text)
    for n in notes:
        print("note:", n)
    print(f"observer (this script) CPU: {ru.ru_utime + ru.ru_stime:.1f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
