#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
#
# "No starvation" (run through scripts/bench.sh --starvation, which starts the environment): do
# gangs that cannot fit, waiting in Slurm's queue, slow down the ordinary pods around them?
# (kube-scheduler's "clogger" benchmarks; upstream slurm-bridge bugs #45 and #51, where pods of
# unschedulable gangs clogged the scheduling queue.) Goal: with --gangs gangs waiting and a churn
# of --churn-rate single pods/s, the ordinary pods bind at >= 0.9 x the rate they have with
# nothing waiting, and their create -> bound p99 grows by no more than 2 x.
#
# One `slurm-bridge scheduler` runs through both phases, on --nodes Slurm external nodes of 64
# CPUs (partition `ext`) registered as Kubernetes Nodes of the same names (bench.py's set-up),
# with bench.py's mutating webhook (`slurm-bridge admission`: finalizer and toleration set at
# create) for this script's namespaces unless --no-webhook:
#
#   0. A blocker: one native external Slurm job (no pod) holding 1 CPU on every node of `ext`,
#      time limit 7 days, for the whole run, shaped as the bridge's jobs (MCS label `kubernetes`:
#      a native job without it would keep the bridge's non-exclusive jobs off its nodes). Ordinary pods (1 CPU) still fit beside it; a pod
#      asking for all 64 CPUs of a node fits nowhere while it runs.
#   1. Baseline, nothing waiting: churn. --churn-rate pods/s (1 CPU, 100Mi, exclusive=false, as
#      bench.py's) created for --churn-seconds by a paced thread pool; each pod, once this
#      script's watch sees it bound, is released as the kubelet and the bridge's controllers
#      would release it (which `slurm-bridge scheduler` alone does not do): its finalizer
#      removed, the pod deleted, its Slurm job cancelled. So the cluster never fills up and
#      each pod costs the bridge what a short-lived pod costs it.
#   2. --gangs gangs that cannot fit: each a batch/v1 Job annotated
#      slurmjob.slinky.slurm.net/gang=true with parallelism --gang-size, and that many pods
#      owned by it (controller reference and job-name label, as the Job controller writes them;
#      no kube-controller-manager runs here), each asking for 64 CPUs. The bridge submits one
#      Slurm job per gang (size pods, one per node, 64 CPUs each); Slurm accepts it and keeps it
#      PENDING (reason Resources): every node has 63 CPUs free at most. Once every gang's job is
#      PENDING in Slurm, and Slurm has forgotten phase 1's ended jobs (MinJobAge), the same
#      churn again; the gangs stay PENDING throughout (checked after).
#
# Slurm's own queue: every job here has priority 1 (priority/basic), so the gangs, queued first,
# come first, and a job that cannot start stops Slurm's main scheduler for the rest of its
# partition ("Priority" for every job behind it): the ordinary jobs would wait for the backfill
# pass (bf_interval, 30 s by default) -- Slurm's policy, not the bridge's queue, which is what
# this measures (measured here: a 1-CPU job behind 2 such gangs RUNNING after 20-30 s, not 1 s).
# So bench.sh --starvation adds bf_min_age_reserve=86400 to SchedulerParameters (the same in
# both phases): a job pending for less than a day then stops nobody, and the ordinary jobs start
# at once beside the gangs, as kube-scheduler's unschedulable pods stop nobody. This script
# warns when slurm.conf lacks it.
#
# Per phase, for the churn's pods (taken from this script's pod watch, as bench.py's):
#   offered / achieved create rate: --churn-rate; the pods created / the time the creates took.
#   bind rate (the goal's): the pods / the time from the first create to the last pod bound,
#     as kube-scheduler's SchedulingThroughput averages over its measured pods. While the
#     machine keeps up, about the offered rate (--churn-seconds plus the last pod's latency);
#     when it does not (the creates fall behind), what it managed for the same pods.
#   bind rate in the window: pods bound per second in the churn window's last three quarters
#     (first create + --churn-seconds / 4 to first create + --churn-seconds; the first quarter
#     left out while the first pods' latency fills the pipe). The same while the machine keeps
#     up. When it does not, the creates run past the window (at 200/s on 2 busy cores they took
#     50-65 s for 4,000 pods), so the rate above, over every pod, is the goal's; both then
#     follow the creates, which wobble with the machine's load (four such runs: ratios
#     0.91-1.32, in the window 0.82-1.27; at 40/s, which the machine keeps up with, 0.99-1.01).
#   create -> bound p50 / p99: from just before the create's POST to the watch event that shows
#     spec.nodeName, over every pod of the phase.
#   all bound: seconds from the first create to the last pod bound.
#   bridge CPU per bound pod: the bridge's utime+stime over the phase (first create to all
#     bound) / the pods bound. slurmctld's CPU seconds over the same time (in phase 2 it also
#     tries the waiting gangs on every pass).
#   the bridge's requests to slurmrestd per bound pod (its /metrics, over the same time): the
#     submit, the job's layout, and its share of the job polls, which in phase 2 also cover the
#     waiting gangs' jobs.
#   cores busy: the CPU of the daemons (slurmctld, slurmrestd, kube-apiserver, etcd), the bridge,
#     the webhook and this script over the same time / its wall time (1.4-1.5 of 2 cores at
#     200/s in the runs above, other work on the machine taking the rest): while the creates
#     fall behind the offered rate, the machine, not the bridge, sets the rates.
# At the end: every churn pod bound once (a distinct Slurm job each, none left live), the gangs'
# pods unbound and their jobs still PENDING, and `slurm-bridge check` (the invariants) once.
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from bench import BRIDGE, HZ, LIVE, SLURM_API, cpu_ticks, log, now, pct  # noqa: E402

NODE_CPUS = 64  # bench.Bench.register_nodes: CPUs=64 per external node
GANG_NS = "bench-starve-gangs"
PHASES = ("base", "clog")  # nothing waiting; the gangs waiting


class ChurnWatch(bench.PodWatch):
    """bench.PodWatch that also hands each pod, the first time it is seen bound, to `on_bound`
    (name, job id label or None); called on the watch's thread, so it only queues."""

    def __init__(self, kube, ns, rv, on_bound):
        self.on_bound = on_bound
        super().__init__(kube, ns, rv)

    def note(self, pod, t):
        name = pod["metadata"]["name"]
        first = bool(pod["spec"].get("nodeName")) and name not in self.bound
        super().note(pod, t)
        if first:
            self.on_bound(name, self.job.get(name))


class Starvation(bench.Bench):
    def __init__(self, a):
        super().__init__(a)
        self.gang_size = max(1, min(a.gang_size, a.nodes))  # Slurm refuses more nodes than ext has
        self.blocker = None  # the blocker's Slurm job id

    # --- 0. the blocker ------------------------------------------------------------------
    def submit_blocker(self):
        """One external job (no pod, no process) of 1 CPU on every node, for 7 days: a gang pod
        that asks for a whole node's CPUs fits nowhere while it runs. Its time limit is beyond
        the backfill window (1 day), so Slurm plans no start for the gangs and backfill never
        holds nodes back for them."""
        n = self.a.nodes
        job = self.job("starve-blocker")
        job["job"].update(nodes=str(n), minimum_nodes=n, maximum_nodes=n,
                          time_limit={"set": True, "number": 7 * 24 * 60},
                          admin_comment="slurm-bridge starvation bench: blocker")
        self.blocker = self.scall("POST", "/job/submit", job)["job_id"]
        deadline = now() + 60
        while self.job_states().get(self.blocker) != "RUNNING":
            if now() > deadline:
                raise RuntimeError(f"the blocker, job {self.blocker}, is not RUNNING after 60 s")
            time.sleep(0.2)
        log(f"blocker: job {self.blocker} RUNNING, 1 CPU on each of the {n} nodes")

    # --- 2. the gangs --------------------------------------------------------------------
    def gang_pod_spec(self):
        lim = {"cpu": str(NODE_CPUS), "memory": "100Mi"}
        return {"schedulerName": BRIDGE, "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "busybox",
                                "resources": {"requests": lim, "limits": lim}}]}

    def create_gangs(self):
        """--gangs Jobs of --gang-size pods each: the Job (no controller acts on it) and its pods,
        owned by it as the Job controller would make them."""
        self.namespace(GANG_NS)
        ann = {"slurmjob.slinky.slurm.net/gang": "true",
               "slurmjob.slinky.slurm.net/exclusive": "false"}
        k = self.gang_size

        def gang(g):
            name = f"gang-{g:02d}"
            job = self.kcall("POST", f"/apis/batch/v1/namespaces/{GANG_NS}/jobs", {
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "annotations": ann},
                "spec": {"parallelism": k, "completions": k, "backoffLimit": 0,
                         "template": {"spec": self.gang_pod_spec()}}})
            # The labels the apiserver gave the template (job-name, controller-uid): the bridge
            # finds a Job's pods by job-name.
            labels = job["spec"]["template"]["metadata"].get("labels", {})
            owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name,
                     "uid": job["metadata"]["uid"], "controller": True,
                     "blockOwnerDeletion": True}
            for i in range(k):
                self.kcall("POST", f"/api/v1/namespaces/{GANG_NS}/pods", {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"{name}-{i}", "labels": labels,
                                 "ownerReferences": [owner]},
                    "spec": self.gang_pod_spec()})

        self.pmap(gang, range(self.a.gangs))

    def gang_jobs(self):
        """The live Slurm jobs of the gangs (their tag's group is Job/<GANG_NS>/...): job id ->
        (state, reason, pods listed)."""
        _, obj = self.slurm.call("GET", SLURM_API + "/jobs/")
        out = {}
        for j in obj.get("jobs", []):
            try:
                tag = json.loads(j.get("admin_comment") or "null")
            except ValueError:
                continue
            group = ((tag or {}).get("slurm-bridge") or {}).get("group", "") \
                if isinstance(tag, dict) else ""
            state = (j.get("job_state") or ["?"])[0]
            if group.startswith(f"Job/{GANG_NS}/") and state in LIVE:
                out[j["job_id"]] = (state, j.get("state_reason", "?"), len(tag.get("pods", [])))
        return out

    def stray_jobs(self):
        """The bridge's live jobs that are no gang's: after the churn, a second job for a pod,
        or one that was not cancelled."""
        return [j["job_id"] for j, tag in self.live_bridge_jobs()
                if not tag["slurm-bridge"].get("group", "").startswith(f"Job/{GANG_NS}/")]

    def wait_gangs_pending(self):
        deadline = now() + 120
        while True:
            jobs = self.gang_jobs()
            if len(jobs) >= self.a.gangs and all(s == "PENDING" for s, _, _ in jobs.values()):
                break
            if now() > deadline:
                raise RuntimeError(f"gangs: {len(jobs)} of {self.a.gangs} jobs, states "
                                   f"{sorted(set(s for s, _, _ in jobs.values()))} after 120 s")
            time.sleep(0.5)
        log(f"gangs: {len(jobs)} jobs PENDING in Slurm ({self.reasons(jobs)})")
        return jobs

    @staticmethod
    def reasons(jobs):
        count = {}
        for s, r, _ in jobs.values():
            count[f"{s}/{r}"] = count.get(f"{s}/{r}", 0) + 1
        return ", ".join(f"{v} {k}" for k, v in sorted(count.items()))

    def wait_ended_purged(self):
        """Waits (up to --forget-timeout s) until slurmctld has purged the ended jobs (MinJobAge
        60 s, a purge pass about once a minute), so that each phase starts from the same job
        list (the bridge's lists and Slurm's passes walk it); the ended jobs left, for the
        table."""
        t0 = now()
        ended = lambda: sum(1 for s in self.job_states().values() if s not in LIVE)
        while ended() and now() < t0 + self.a.forget_timeout:
            time.sleep(1)
        left = ended()
        log(f"Slurm forgot the ended jobs in {now() - t0:.0f} s" if not left else
            f"{left} ended jobs still in Slurm's job list after {now() - t0:.0f} s")
        return left

    # --- 1./2. churn ---------------------------------------------------------------------
    def churn(self, phase, br):
        """--churn-rate pods/s for --churn-seconds in a namespace of their own; each pod released
        once bound. The phase's figures."""
        a, ns = self.a, f"bench-starve-{phase}"
        self.namespace(ns)
        n = max(1, round(a.churn_rate * a.churn_seconds))
        errors = []
        jobs = {}  # pod -> its job id, as the watch saw it bound
        lock = threading.Lock()

        def release(name, jid):
            # The kubelet's and the controllers' part: the pod goes, then its job.
            try:
                self.kcall("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}",
                           {"metadata": {"finalizers": None}}, "application/merge-patch+json",
                           ok=(200, 404))
                self.kcall("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0",
                           ok=(200, 202, 404))
                if jid:
                    self.slurm.call("DELETE", SLURM_API + f"/job/{jid}")
            except Exception as e:  # counted; the phase goes on
                with lock:
                    errors.append(f"release {name}: {e}")

        releaser = concurrent.futures.ThreadPoolExecutor(max_workers=a.concurrency)

        def on_bound(name, jid):
            with lock:
                jobs[name] = jid
            releaser.submit(release, name, jid)

        lst = self.list_pods(ns)
        w = ChurnWatch(self.kube, ns, lst["metadata"]["resourceVersion"], on_bound)
        # A warm-up pod, released like the others: in phase 2 it also shows that an ordinary
        # pod still starts while the gangs wait.
        t = now()
        self.kcall("POST", f"/api/v1/namespaces/{ns}/pods", self.pod("warmup", BRIDGE))
        self.wait_bound(w, 1, 120, f"{phase} warm-up")
        log(f"{phase}: warm-up pod bound in {(now() - t) * 1000:.0f} ms")

        created = {}

        def create(i):
            name = f"c-{i:05d}"
            sent = now()
            try:
                self.kcall("POST", f"/api/v1/namespaces/{ns}/pods", self.pod(name, BRIDGE))
                created[name] = sent
            except Exception as e:
                with lock:
                    errors.append(f"create {name}: {e}")
            return now()

        creator = concurrent.futures.ThreadPoolExecutor(max_workers=a.concurrency)
        q0 = self.metrics_requests()
        c0, b0, m0 = self.daemon_cpu(), cpu_ticks(br.pid), time.process_time()
        h0 = self.hook_cpu()
        t0 = now()
        futs = []
        for i in range(n):  # paced: pod i is handed to the pool at t0 + i / rate
            time.sleep(max(0.0, t0 + i / a.churn_rate - now()))
            futs.append(creator.submit(create, i))
        t_created = max(f.result() for f in futs)
        creator.shutdown()
        want = len(created) + 1  # and the warm-up
        deadline = now() + a.drain_timeout
        while w.count() < want and now() < deadline:
            time.sleep(0.05)
        t_bound = now()
        b1, c1, m1 = cpu_ticks(br.pid), self.daemon_cpu(), time.process_time()
        h1 = self.hook_cpu()
        q1 = self.metrics_requests()
        w.close()  # no more releases handed over, then the last ones done
        releaser.shutdown(wait=True)
        with w.lock:
            bound = {p: w.bound[p] for p in created if p in w.bound}
        lat = [(bound[p] - created[p]) * 1000 for p in bound]
        window = a.churn_seconds
        in_window = sum(1 for p in bound if t0 + window / 4 < bound[p] <= t0 + window)
        last = max(bound.values(), default=t0)
        with open(f"{self.out}/starvation-{phase}.csv", "w") as f:
            f.write("pod,created_s,bound_s,job\n")
            for p in sorted(created):
                f.write(f"{p},{created[p] - t0:.4f},"
                        f"{(bound[p] - t0) if p in bound else float('nan'):.4f},"
                        f"{jobs.get(p) or ''}\n")
        r = {"n": n, "created": len(created), "bound": len(bound),
             "create_rate": len(created) / max(1e-9, t_created - t0),
             "window_rate": in_window / (window * 0.75), "p50": pct(lat, .5),
             "p99": pct(lat, .99), "all_bound": last - t0,
             "rate": len(bound) / max(1e-9, last - t0), "complete": len(bound) == len(created),
             "bridge_cpu_ms": (b1 - b0) / HZ * 1000 / max(1, len(bound)),
             "requests": (q1 - q0) / max(1, len(bound)),
             "slurmctld_s": (c1.get("slurmctld", 0) - c0.get("slurmctld", 0)) / HZ,
             "cores": ((sum(c1.values()) - sum(c0.values()) + b1 - b0) / HZ + m1 - m0 + h1 - h0)
             / max(1e-9, t_bound - t0),
             "jobs": {p: jobs.get(p) for p in bound}, "errors": errors}
        log(f"{phase}: {len(created)}/{n} pods created at {r['create_rate']:.0f}/s, "
            f"{len(bound)} bound ({r['rate']:.0f}/s; {r['window_rate']:.0f}/s in the window's "
            "last three quarters), "
            f"create->bound p50 {r['p50']:.0f} ms, p99 "
            f"{r['p99']:.0f} ms, all bound {r['all_bound']:.1f} s after the first create"
            + (f"; {len(errors)} errors, first: {errors[0][:200]}" if errors else ""))
        if not r["complete"]:
            self.notes.append(f"{phase}: only {len(bound)} of {len(created)} pods bound within "
                              f"--drain-timeout {a.drain_timeout} s")
        return r

    # --- the end -------------------------------------------------------------------------
    def verify(self, results):
        """Every churn pod bound once (a distinct Slurm job each, none of the bridge's jobs
        left live but the gangs'), the gangs untouched, and `slurm-bridge check`."""
        out = []
        dup = 0
        for phase in PHASES:
            ids = [j for j in results[phase]["jobs"].values() if j]
            dup += len(ids) - len(set(ids))
            missing = sum(1 for j in results[phase]["jobs"].values() if not j)
            out.append(f"{phase}: {results[phase]['bound']} churn pods bound, "
                       f"{len(set(ids))} distinct job ids, {missing} without a job id label")
        deadline = now() + 15  # the last cancels may still be COMPLETING
        while True:
            stray = self.stray_jobs()
            if not stray or now() > deadline:
                break
            time.sleep(1)
        gangs = self.gang_jobs()
        gang_pods = self.list_pods(GANG_NS)["items"]
        gang_bound = sum(1 for p in gang_pods if p["spec"].get("nodeName"))
        out.append(f"pods in two jobs: {dup}; live bridge jobs left that are no gang's "
                   f"(a second job for a pod, or one not cancelled): {len(stray)}")
        out.append(f"gangs at the end: {len(gangs)} jobs ({self.reasons(gangs)}), "
                   f"{gang_bound} of {len(gang_pods)} gang pods bound")
        chk = subprocess.run(
            [self.a.binary, "check", "--config", f"{self.out}/bridge-config.yaml",
             "--settle", "15s"], capture_output=True, text=True,
            env=dict(os.environ, SLURM_JWT_FILE=self.env["SLURM_JWT_FILE"],
                     KUBECONFIG=self.env["KUBECONFIG"]))
        with open(f"{self.out}/check-starvation.log", "w") as f:
            f.write(chk.stdout + chk.stderr)
        lines = [x for x in chk.stdout.splitlines() if x.strip()] or [chk.stderr]
        out.append(f"slurm-bridge check (every namespace): exit {chk.returncode}, " +
                   ("no violations" if chk.returncode == 0 else
                    f"{len(lines)} line(s), first: {lines[0][:160]}"))
        ok = dup == 0 and not stray and gang_bound == 0 and chk.returncode == 0 and \
            len(gangs) == self.a.gangs and all(s == "PENDING" for s, _, _ in gangs.values())
        return ok, out

    def check_sched_params(self):
        """Notes when Slurm's SchedulerParameters lack bf_min_age_reserve (see the top)."""
        try:
            with open(os.path.join(self.run_dir, "slurm/etc/slurm.conf")) as f:
                params = [x for x in f if x.startswith("SchedulerParameters=")]
        except OSError:
            params = []
        if not any("bf_min_age_reserve=" in x for x in params):
            self.notes.append("SchedulerParameters without bf_min_age_reserve: the waiting gangs "
                              "stop Slurm's main scheduler, and the ordinary jobs wait for "
                              "backfill (Slurm's queue, not the bridge's)")

    def hook_cpu(self):
        """The webhook's CPU seconds so far (0 without one)."""
        return self.webhook_cpu() if getattr(self, "webhook", None) else 0.0

    def run(self):
        self.check_sched_params()
        self.register_nodes(self.nodes)
        self.submit_blocker()
        # bench.py's webhook, for the churn's and the gangs' pods.
        if self.a.webhook:
            self.webhook_namespaces = [f"bench-starve-{p}" for p in PHASES] + [GANG_NS]
            self.start_webhook()
        br = self.start_bridge("starvation")
        res, purged = {}, {}
        try:
            res["base"] = self.churn("base", br)
            self.create_gangs()
            self.wait_gangs_pending()
            purged["clog"] = self.wait_ended_purged()
            pending = self.gang_jobs()  # again, just before the churn
            res["clog"] = self.churn("clog", br)
            ok, checks = self.verify(res)
        finally:
            self.stop(br)
            if getattr(self, "webhook", None):
                self.stop(self.webhook)
        return self.table(res, pending, purged, ok, checks)

    def table(self, res, pending, purged, ok, checks):
        a, b, c = self.a, res["base"], res["clog"]
        rows = []

        def row(metric, x, y, ratio=False, goal=""):
            rows.append((metric, x, y, (y / x) if ratio and x else None, goal))

        row("offered create rate, pods/s", a.churn_rate, a.churn_rate)
        row("achieved create rate, pods/s", b["create_rate"], c["create_rate"], True)
        row("bind rate, pods/s (pods / first create -> last bound)", b["rate"],
            c["rate"], True, ">= 0.9")
        row(f"bind rate in the churn window's last {a.churn_seconds * .75:g} s, pods/s",
            b["window_rate"], c["window_rate"], True)
        row("create->bound ms, p50", b["p50"], c["p50"], True)
        row("create->bound ms, p99", b["p99"], c["p99"], True, "<= 2.0")
        row("s from the first create to the last pod bound", b["all_bound"], c["all_bound"],
            True)
        row("pods created / bound", f"{b['created']} / {b['bound']}",
            f"{c['created']} / {c['bound']}")
        row("bridge CPU ms per bound pod", b["bridge_cpu_ms"], c["bridge_cpu_ms"], True)
        row("bridge's slurmrestd requests per bound pod", b["requests"], c["requests"], True)
        row("slurmctld CPU s in the phase", b["slurmctld_s"], c["slurmctld_s"], True)
        row("cores busy (daemons, bridge, webhook, this script)", b["cores"], c["cores"])
        waiting = f"{a.gangs} gangs waiting"
        width = max(len(x[0]) for x in rows)
        fmt = lambda v: v if isinstance(v, str) else (
            "-" if v is None else (f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}"))
        lines = [f"{'metric':<{width}} | {'nothing waiting':>15} | {waiting:>16} | "
                 f"{'ratio':>6} | goal",
                 f"{'-' * width}-|-{'-' * 15}-|-{'-' * 16}-|-{'-' * 6}-|-----"]
        for metric, x, y, ratio, goal in rows:
            lines.append(f"{metric:<{width}} | {fmt(x):>15} | {fmt(y):>16} | {fmt(ratio):>6} | "
                         f"{goal}")
        rate, p99 = c["rate"] / b["rate"], c["p99"] / b["p99"]
        lines.append(f"goal: bind rate ratio {rate:.2f} (>= 0.9: "
                     f"{'met' if rate >= 0.9 else 'NOT met'}), p99 ratio {p99:.2f} (<= 2.0: "
                     f"{'met' if p99 <= 2.0 else 'NOT met'})")
        if min(b["create_rate"], c["create_rate"]) < 0.9 * a.churn_rate:
            lines.append(f"note: the creates fell behind the offered {a.churn_rate:g} pods/s: "
                         "this machine, not the bridge, set the rates, and their ratio follows "
                         "its load (a lower --churn-rate compares the bridge)")
        lines.append(f"gangs: {a.gangs} Jobs of {self.gang_size} pods, {NODE_CPUS} CPUs each "
                     f"(1 of each node's CPUs held by the blocker); before the churn: "
                     f"{self.reasons(pending)}; ended jobs still in Slurm at the start of "
                     f"phase 2: {purged.get('clog', 0)}")
        lines += checks
        lines.append("correctness: " + ("ok" if ok else "NOT ok (see above)"))
        return "\n".join(lines)


def main():
    # bench.py's options, so that scripts/bench.sh passes the same arguments to both.
    p = bench.arg_parser()
    p.set_defaults(concurrency=16)
    # This benchmark's own.
    p.add_argument("--churn-rate", type=float, default=200, help="pods created per second")
    p.add_argument("--churn-seconds", type=float, default=20, help="how long pods are created")
    p.add_argument("--gangs", type=int, default=20, help="gangs waiting in phase 2")
    p.add_argument("--gang-size", type=int, default=4,
                   help="pods per gang (at most --nodes), 64 CPUs each")
    p.add_argument("--drain-timeout", type=int, default=300,
                   help="s after the last create to wait for every pod to be bound")
    a = p.parse_args()
    if a.churn_rate <= 0 or a.churn_seconds <= 0 or a.gangs < 1:
        p.error("--churn-rate, --churn-seconds and --gangs must be positive")
    # SIGTERM (bench.sh stopped, a ctest timeout) unwinds through `finally`, which stops the
    # bridge this script started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    s = Starvation(a)
    bench.report(s.run(), s.notes)


if __name__ == "__main__":
    main()
