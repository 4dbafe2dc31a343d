#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
#
# "A busy HPC cluster" (issue #46, goal 1; run through scripts/bench.sh --busy, which starts the
# environment): what does a running bridge cost Slurm when Slurm's queue is long with other
# users' work? Goal: slurmctld + slurmrestd CPU with the bridge running <= 1.10 x the same
# window without it.
#
#   0. --held native jobs (20,000) of the chroot's ordinary user `k8s` (uid 2000; the bridge's
#      jobs are SlurmUser's), held (`hold: true`, so PENDING with reason JobHeldUser for the
#      whole run), submitted before any window through slurmrestd's POST /job/submit by 8
#      clients with a token for `k8s` (SLURM_USER_JWT_FILE); the time they take is printed.
#      slurm.conf's MaxJobCount must leave room (bench.sh raises it when it does not).
#   1. A churn of short native jobs for the whole run: one `sbatch --wrap true` (partition
#      batch, the slurmd node) every --churn-interval s (2), run as `k8s` inside the chroot
#      (testenv/slurm/exec.sh + setpriv): through slurmctld, not slurmrestd, as a user's sbatch.
#   2. Window A (--window s, 120), no bridge: CPU seconds of slurmctld and slurmrestd
#      (utime+stime from /proc/PID/stat, bench.py's cpu_ticks) / the window's wall time, and
#      their RSS (VmRSS sampled every second; the peak of the samples).
#   3. `slurm-bridge all` (the scheduler and the controllers: the controllers' orphan sweep reads
#      Slurm's job list every jobSweepInterval, 30 s by default) with bench.py's config, on
#      --nodes external nodes (bench.py's: Slurm State=External nodes of partition ext,
#      registered as Kubernetes Nodes), and --busy-pods pods (4; 1 CPU, exclusive=false, as
#      bench.py's) created for it; once all are bound, --settle s (100: the scheduler reads
#      Slurm's whole job list for 90 s after start-up) before window B, of the same length: the
#      same figures plus the bridge's. The bridge talks to slurmrestd through a counting proxy in
#      this script (CountingProxy): the bridge's /metrics count its requests per server only,
#      not per kind nor bytes, so the proxy counts each request by method and path (ids and
#      query values left out) and the bytes of each response (status line, headers and body),
#      i.e. the bytes the bridge read from slurmrestd (per kind, a response counts whole in the
#      window it ends in; the total counts every byte read). The bridge's own request counter
#      over the window is printed beside the proxy's as a check.
#   4. Window A2 (unless --no-again): the bridge stopped, its jobs cancelled, the same as A:
#      A and A2 side by side show the noise of this machine.
# No webhook (the bridge patches its pods itself): it never talks to Slurm.
# Nothing of this script calls slurmrestd during a window; the churn's sbatch and the RSS
# sampling are the same in every window. This script's own CPU (the proxy, the churn's
# processes) is printed per window.
import concurrent.futures
import os
import re
import socket
import subprocess
import sys
import threading
import time
import signal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from bench import BRIDGE, HZ, SLURM_API, cpu_ticks, log, now, vm_hwm_mb  # noqa: E402

NS = "bench-busy"
GOAL = 1.10


def vm_rss_mb(pid):
    return bench.proc_status_mb(pid, "VmRSS")


def kind_of(method, target):
    """A request's kind: its method and path with the API prefix (/slurm/vX.Y.Z), numbers and
    query values left out (`GET /jobs/?update_time=`, `GET /job/{id}`)."""
    path, _, query = target.partition("?")
    path = re.sub(r"^/slurm/v[0-9.]+(?=/)", "", path)
    path = re.sub(r"/[0-9][0-9_.,]*(?=/|$)", "/{id}", path)
    keys = sorted({q.split("=", 1)[0] for q in query.split("&") if q})
    return f"{method} {path}" + ("?" + "&".join(k + "=" for k in keys) if keys else "")


class Framer:
    """Splits one direction of an HTTP/1.1 connection into messages: calls on_head(start line)
    at each message's head and on_end(bytes of the message) at its end. Bodies by
    Content-Length or chunked; a response with neither ends at the connection's close."""

    def __init__(self, on_head, on_end):
        self.on_head, self.on_end = on_head, on_end
        self.state, self.buf, self.left, self.size = "head", b"", 0, 0

    def feed(self, data):
        self.size += len(data)
        while data:
            if self.state in ("head", "chunk-size", "trailer"):
                self.buf += data
                data = b""
                sep = b"\r\n\r\n" if self.state == "head" else b"\r\n"
                k = self.buf.find(sep)
                if k < 0:
                    if len(self.buf) > (1 << 20):
                        raise ValueError("no end of line in 1 MiB")
                    return
                line, data, self.buf = self.buf[:k], self.buf[k + len(sep):], b""
                if self.state == "head":
                    self.begin(line)
                    if self.state == "body" and self.left == 0:  # no body
                        self.end(len(data))
                elif self.state == "chunk-size":
                    n = int(line.split(b";")[0].strip() or b"0", 16)
                    self.state, self.left = ("chunk", n + 2) if n else ("trailer", 0)
                elif line == b"":  # the trailer's end
                    self.end(len(data))
                continue
            take = len(data) if self.state == "close" else min(self.left, len(data))
            self.left -= take
            data = data[take:]
            if self.state == "body" and self.left == 0:
                self.end(len(data))
            elif self.state == "chunk" and self.left == 0:
                self.state = "chunk-size"

    def begin(self, head):
        lines = head.decode("latin-1").split("\r\n")
        self.on_head(lines[0])
        hdr = {}
        for h in lines[1:]:
            k, _, v = h.partition(":")
            hdr[k.strip().lower()] = v.strip()
        if "chunked" in hdr.get("transfer-encoding", "").lower():
            self.state = "chunk-size"
        elif "content-length" in hdr:
            self.state, self.left = "body", int(hdr["content-length"])
        elif lines[0].startswith("HTTP/") and not re.match(r"HTTP/\S+ (1\d\d|204|304)",
                                                            lines[0]):
            self.state = "close"
        else:
            self.state, self.left = "body", 0

    def end(self, unread):
        """The message ended with `unread` bytes of this feed() still to come (the next's)."""
        self.on_end(self.size - unread)
        self.size = unread
        self.state = "head"

    def close(self):
        if self.state == "close":
            self.on_end(self.size)


class CountingProxy:
    """A TCP proxy on 127.0.0.1 in front of slurmrestd that counts the requests that pass, by
    kind (kind_of), and the bytes of their responses. Read with snapshot()."""

    def __init__(self, upstream):
        self.upstream = upstream  # (host, port)
        self.lock = threading.Lock()
        self.requests, self.bytes = {}, {}  # kind -> count, kind -> response bytes
        self.down = 0  # every byte read from slurmrestd
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def snapshot(self):
        with self.lock:
            return dict(self.requests), dict(self.bytes), self.down

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        try:
            s = socket.create_connection(self.upstream)
        except OSError:
            c.close()
            return
        kinds = []  # the kinds of the requests sent and not yet answered, oldest first
        klock = threading.Lock()

        def req_head(line):
            parts = line.split(" ")
            kind = kind_of(parts[0], parts[1] if len(parts) > 1 else "?")
            with klock:
                kinds.append(kind)
            with self.lock:
                self.requests[kind] = self.requests.get(kind, 0) + 1

        def resp_end(n):
            with klock:
                kind = kinds.pop(0) if kinds else "(unknown)"
            with self.lock:
                self.bytes[kind] = self.bytes.get(kind, 0) + n

        up = Framer(req_head, lambda n: None)
        down = Framer(lambda line: None, resp_end)

        def pump(src, dst, framer, is_down):
            try:
                while True:
                    data = src.recv(1 << 20)
                    if not data:
                        break
                    if is_down:
                        with self.lock:
                            self.down += len(data)
                    try:
                        framer.feed(data)  # before the send: a request's kind is queued first
                    except ValueError:
                        pass
                    dst.sendall(data)
            except OSError:
                pass
            if is_down:
                framer.close()
            for sk in (src, dst):
                try:
                    sk.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        t = threading.Thread(target=pump, args=(c, s, up, False), daemon=True)
        t.start()
        pump(s, c, down, True)
        t.join()
        c.close()
        s.close()

    def close(self):
        self.sock.close()


class Busy(bench.Bench):
    def __init__(self, a):
        super().__init__(a)
        with open(self.env["SLURM_USER_JWT_FILE"]) as f:
            utoken = f.read().strip()
        self.user_name = self.env.get("SLURM_USER_NAME", "k8s")
        self.user = bench.Http(self.env["SLURM_REST_URL"], {
            "X-SLURM-USER-NAME": self.user_name, "X-SLURM-USER-TOKEN": utoken})
        self.proxy = None
        self.churn_stop = threading.Event()
        self.churn_sent = self.churn_failed = 0
        self.held_ids = []

    # --- 0. the held jobs ----------------------------------------------------------------
    def held_job(self, i):
        return {"job": {"name": f"busy-held-{i:05d}", "partition": "batch", "hold": True,
                        "script": "#!/bin/sh\ntrue\n", "current_working_directory": "/tmp",
                        "environment": ["PATH=/usr/bin:/bin"], "standard_output": "/dev/null",
                        "standard_error": "/dev/null", "tasks": 1, "cpus_per_task": 1,
                        "time_limit": {"set": True, "number": 10}}}

    def submit_held(self):
        n, errors = self.a.held, []
        t0 = now()

        def submit(i):
            status, obj = self.user.call("POST", SLURM_API + "/job/submit", self.held_job(i))
            if status != 200 or obj.get("errors") or not obj.get("job_id"):
                errors.append(f"HTTP {status}: {str(obj)[:200]}")
                return None
            return obj["job_id"]

        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            ids = list(pool.map(submit, range(n)))
        took = now() - t0
        self.held_ids = [j for j in ids if j]
        if errors:
            raise RuntimeError(f"{len(errors)} of {n} held submits failed, first: {errors[0]}")
        self.submit_s = max(took, 1e-3)
        log(f"{n} held jobs of {self.user_name} submitted in {took:.1f} s ({n / took:.0f}/s)")

    def held_pending(self):
        """How many of the held jobs are PENDING now (one GET /jobs/state/, outside windows)."""
        states = self.job_states()
        return sum(1 for j in self.held_ids if states.get(j) == "PENDING")

    # --- 1. the churn --------------------------------------------------------------------
    def churn(self):
        """One short native job every --churn-interval s, as the chroot's ordinary user."""
        cmd = [os.path.join(self.a.root, "testenv/slurm/exec.sh"), self.run_dir, "setpriv",
               "--reuid=2000", "--regid=2000", "--clear-groups", "sbatch", "--partition=batch",
               "--output=/dev/null", "--error=/dev/null", "--chdir=/tmp", "--time=1",
               "--job-name=busy-churn", "--wrap", "true"]
        nxt = now()
        while not self.churn_stop.is_set():
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.churn_sent += 1
            if r.returncode != 0:
                self.churn_failed += 1
                if self.churn_failed <= 3:
                    log(f"churn: sbatch failed: {r.stderr.decode(errors='replace')[:200]}")
            nxt += self.a.churn_interval
            self.churn_stop.wait(max(0.0, nxt - now()))

    # --- 2-4. the windows ----------------------------------------------------------------
    def window(self, tag, bridge=None):
        """One measurement window of --window s: the daemons' (and the bridge's) CPU, RSS
        samples, the proxy's counts and the bridge's own request counter."""
        pids = {k: self.daemons[k] for k in ("slurmctld", "slurmrestd")}
        if bridge:
            pids["bridge"] = bridge.pid
        rss = {k: 0.0 for k in pids}
        churn0, t_self0 = self.churn_sent, os.times()
        c0 = {k: cpu_ticks(p) for k, p in pids.items()}
        p0 = self.proxy.snapshot() if self.proxy else None
        m0 = self.metrics_requests() if bridge else None
        t0 = now()
        end = t0 + self.a.window
        while True:
            for k, p in pids.items():
                rss[k] = max(rss[k], vm_rss_mb(p))
            if now() >= end:
                break
            time.sleep(min(1.0, max(0.0, end - now())))
        c1 = {k: cpu_ticks(p) for k, p in pids.items()}
        t1 = now()
        p1 = self.proxy.snapshot() if self.proxy else None
        m1 = self.metrics_requests() if bridge else None
        t_self1 = os.times()
        wall = t1 - t0
        out = {"wall": wall, "rss": rss, "churn": self.churn_sent - churn0,
               "hwm": vm_hwm_mb(pids["slurmrestd"]),
               "cpu": {k: (c1[k] - c0[k]) / HZ / wall for k in pids},
               "self": (t_self1.user + t_self1.system - t_self0.user - t_self0.system) / wall,
               "children": (t_self1.children_user + t_self1.children_system
                            - t_self0.children_user - t_self0.children_system) / wall}
        if bridge:
            out["bridge_hwm"] = vm_hwm_mb(bridge.pid)
            out["metrics_requests"] = (m1 - m0) * 60 / wall
        if p0 is not None:
            kinds = set(p1[0]) | set(p1[1])
            out["requests"] = {k: (p1[0].get(k, 0) - p0[0].get(k, 0)) * 60 / wall for k in kinds}
            out["bytes"] = {k: (p1[1].get(k, 0) - p0[1].get(k, 0)) * 60 / wall for k in kinds}
            out["down"] = (p1[2] - p0[2]) * 60 / wall
        cpu = out["cpu"]
        log(f"window {tag}: {wall:.0f} s, slurmctld {cpu['slurmctld']:.3f} + slurmrestd "
            f"{cpu['slurmrestd']:.3f} CPU-s/s" +
            (f", bridge {cpu['bridge']:.3f}" if bridge else "") +
            (f", {out['down'] / 1e6:.2f} MB/min from slurmrestd" if "down" in out else ""))
        return out

    def start_bridge_all(self):
        """`slurm-bridge all` (scheduler and controllers) through the counting proxy."""
        return self.start_bridge("busy", command="all",
                                 slurm_url=f"http://127.0.0.1:{self.proxy.port}")

    def wait_metrics(self, br):
        deadline = now() + 60
        while now() < deadline:
            if br.poll() is not None:
                raise RuntimeError(f"slurm-bridge all exited {br.returncode} (bridge-busy.log)")
            try:
                self.bridge_metrics()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("the bridge's /metrics did not answer within 60 s")

    def run(self):
        a = self.a
        self.register_nodes(self.nodes)
        self.submit_held()
        churn = threading.Thread(target=self.churn, daemon=True)
        churn.start()
        res = {}
        br = None
        try:
            time.sleep(min(10, a.window / 4))  # the churn going, slurmctld settled
            res["A"] = self.window("A")
            url = self.env["SLURM_REST_URL"].split("//", 1)[1].split("/")[0]
            host, _, port = url.rpartition(":")
            self.proxy = CountingProxy((host, int(port)))
            self.namespace(NS)
            w = self.watch_from_now(NS)
            tb = now()
            s0 = self.proxy.snapshot()
            br = self.start_bridge_all()
            self.wait_metrics(br)
            self.create_pods(NS, [f"busy-{i}" for i in range(a.busy_pods)], BRIDGE)
            self.wait_bound(w, a.busy_pods, 300, "busy pods")
            w.close()
            bound_s = now() - tb
            log(f"bridge: {a.busy_pods} pods bound {bound_s:.1f} s after its start; settling "
                f"{a.settle} s")
            time.sleep(a.settle)
            s1 = self.proxy.snapshot()
            self.startup = {"s": now() - tb, "bound_s": bound_s,
                            "requests": sum(s1[0].values()) - sum(s0[0].values()),
                            "bytes": s1[2] - s0[2],
                            "kinds": {k: (s1[0].get(k, 0) - s0[0].get(k, 0),
                                          s1[1].get(k, 0) - s0[1].get(k, 0)) for k in s1[0]}}
            res["B"] = self.window("B", br)
            if br.poll() is not None:
                raise RuntimeError(f"slurm-bridge all exited {br.returncode} during window B")
        finally:
            if br:
                self.stop(br)
        if not a.no_again:
            self.slurm_exec("scancel", "--partition=ext")
            time.sleep(min(10, a.window / 4))
            res["A2"] = self.window("A2")
        self.churn_stop.set()
        churn.join()
        self.proxy.close()
        self.pending_at_end = self.held_pending()
        return self.table(res)

    def table(self, res):
        a, A, B, A2 = self.a, res["A"], res["B"], res.get("A2")
        rows = []

        def row(metric, fn, ratio=True):
            vals = [fn(w) if w is not None else None for w in (A, B, A2)]
            ra = vals[1] / vals[0] if ratio and vals[0] and vals[1] is not None else None
            rb = vals[1] / vals[2] if ratio and vals[2] and vals[1] is not None else None
            rows.append((metric, *vals, ra, rb))

        both = lambda w: w["cpu"]["slurmctld"] + w["cpu"]["slurmrestd"]  # noqa: E731
        row("slurmctld CPU-s/s", lambda w: w["cpu"]["slurmctld"])
        row("slurmrestd CPU-s/s", lambda w: w["cpu"]["slurmrestd"])
        row("slurmctld + slurmrestd CPU-s/s (goal ratio <= 1.10)", both)
        row("slurmrestd peak RSS MB (VmRSS, 1 s samples)", lambda w: w["rss"]["slurmrestd"])
        row("slurmrestd VmHWM MB at the window's end (since its start)",
            lambda w: w["hwm"], False)
        row("slurmctld peak RSS MB (VmRSS, 1 s samples)", lambda w: w["rss"]["slurmctld"])
        row("bridge CPU-s/s", lambda w: w["cpu"].get("bridge"), False)
        row("bridge peak RSS MB (VmHWM)", lambda w: w.get("bridge_hwm"), False)
        row("bridge -> slurmrestd requests/min (proxy)",
            lambda w: sum(w["requests"].values()) if "requests" in w else None, False)
        row("bridge -> slurmrestd requests/min (its /metrics)",
            lambda w: w.get("metrics_requests"), False)
        seen = [k for k in B.get("requests", {}) if B["requests"][k] or B["bytes"][k]]
        for k in sorted(seen, key=lambda k: -B["requests"][k]):
            row(f"  requests/min: {k}", lambda w, k=k: w["requests"][k] if "requests" in w
                else None, False)
        row("bytes/min read from slurmrestd, MB (proxy)",
            lambda w: w["down"] / 1e6 if "down" in w else None, False)
        for k in sorted(seen, key=lambda k: -B["bytes"][k]):
            row(f"  MB/min: {k}", lambda w, k=k: w["bytes"][k] / 1e6 if "bytes" in w else None,
                False)
        row("churn jobs submitted in the window", lambda w: w["churn"], False)
        row("this script CPU-s/s (proxy, sampling)", lambda w: w["self"], False)
        row("this script's children CPU-s/s (churn sbatch)", lambda w: w["children"], False)
        head = ("without (A)", "with bridge (B)", "without (A2)", "B/A", "B/A2")
        width = max(len(r[0]) for r in rows)

        def fmt(v):
            if v is None:
                return "-"
            return f"{v:.0f}" if abs(v) >= 100 else (f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}")

        lines = [f"{'metric':<{width}} | " + " | ".join(f"{h:>15}" for h in head),
                 f"{'-' * width}-|-" + "-|-".join("-" * 15 for _ in head)]
        for r in rows:
            lines.append(f"{r[0]:<{width}} | " + " | ".join(f"{fmt(v):>15}" for v in r[1:]))
        lines.append("per kind: requests sent and whole responses that ended in the window; "
                     "bytes/min: every byte read in the window (a job list can straddle its "
                     "edges)")
        g = [both(B) / both(w) for w in (A, A2) if w is not None and both(w)]
        verdict = "met" if g and max(g) <= GOAL else "NOT met"
        lines.append("goal: slurmctld + slurmrestd CPU ratio " +
                     ", ".join(f"{x:.2f}" for x in g) +
                     f" (B/A{', B/A2' if len(g) > 1 else ''}; <= {GOAL:.2f}: {verdict})")
        st = self.startup
        lines.append(f"setup: {a.held} held jobs of {self.user_name} submitted through slurmrestd "
                     f"in {self.submit_s:.1f} s ({a.held / self.submit_s:.0f}/s), "
                     f"{self.pending_at_end} still PENDING at the end; churn: one sbatch every "
                     f"{a.churn_interval:g} s, {self.churn_sent} sent, {self.churn_failed} failed; "
                     f"windows of {a.window} s")
        lines.append(f"bridge start-up (start -> window B: pods bound after {st['bound_s']:.1f} s, "
                     f"then {a.settle} s settling): {st['requests']} requests, "
                     f"{st['bytes'] / 1e6:.2f} MB read from slurmrestd in {st['s']:.0f} s: " +
                     ", ".join(f"{k} {n} ({b / 1e6:.2f} MB)" for k, (n, b) in
                               sorted(st["kinds"].items(), key=lambda x: -x[1][1]) if n))
        return "\n".join(lines)


def main():
    # bench.py's options, so that scripts/bench.sh passes the same arguments to every driver.
    p = bench.arg_parser()
    p.add_argument("--held", type=int, default=20000, help="held native jobs in Slurm's queue")
    p.set_defaults(window=120)  # bench.py's --window: here the s of each measurement window
    p.add_argument("--churn-interval", type=float, default=2.0,
                   help="s between two short native jobs")
    p.add_argument("--settle", type=int, default=100,
                   help="s from the bridge's pods bound to window B")
    p.add_argument("--busy-pods", type=int, default=4, help="bridge pods bound before window B")
    p.add_argument("--no-again", action="store_true",
                   help="no window A2 (without the bridge again) after window B")
    a = p.parse_args()
    if a.held < 0 or a.window < 1 or a.churn_interval <= 0 or a.busy_pods < 1:
        p.error("--held >= 0, --window >= 1, --churn-interval > 0 and --busy-pods >= 1")
    # SIGTERM (bench.sh stopped, a ctest timeout) unwinds through `finally`, which stops the
    # bridge this script started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    b = Busy(a)
    bench.report(b.run(), b.notes)


if __name__ == "__main__":
    main()
