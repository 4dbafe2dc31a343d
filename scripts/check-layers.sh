#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Fails when an #include breaks the layering docs/architecture.md describes ("Layout"), naming the
# file, the line and the rule. Three rules, over the C++ files under src/:
#
#  1. bridge/ is pure: its production files include no I/O header (sockets, clients, informers,
#     the Kubernetes runtime pieces, clocks and timers, file reading, logging, Asio).
#  2. Folders sit on floors, and a production file includes only its own folder and folders on
#     lower floors (FLOORS below): kube/ and slurm/ know nothing of bridge/ nor of each other,
#     scheduler/, controllers/, admission/, explain/ and check/ never include each other. Only
#     *_test.cc files include testing/; a test may also include a folder of its own floor.
#  3. No include cycle between units, a unit being x.h with x.cc (so x.cc -> y.h -> x.h is one):
#     each cycle is printed with the include lines that make it.
#
# Usage: scripts/check-layers.sh [ROOT] (default: this checkout). scripts/test.sh runs it beside
# the format check; tests/scripts/check_layers_test.sh checks that each rule fails.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
[ -d "$root/src" ] || { echo "check-layers: no src/ under $root" >&2; exit 2; }
exec python3 - "$root" <<'EOF'
import os
import re
import sys
from collections import defaultdict

root = sys.argv[1]

# The floors of src/'s folders, lowest first (docs/architecture.md, "Layout"). A sub-folder
# (kube/runtime/, controllers/node/) is on its folder's floor; "" is src/ itself (main.cc).
FLOORS = {
    "common": 1,
    "async": 2, "net": 2,
    "kube": 3, "slurm": 3,
    "bridge": 4,
    "wiring": 5,
    "admission": 6, "check": 6, "controllers": 6, "explain": 6, "scheduler": 6,
    "app": 7,
    "": 8,
}

# Rule 1: what bridge/'s production files may not include, and why.
BRIDGE_QUOTED = [
    (r"net/", "sockets (net/)"),
    (r"async/", "clocks, timers and tasks (async/)"),
    (r"kube/runtime/", "the Kubernetes runtime pieces (kube/runtime/)"),
    (r"kube/(client|informer|reflector|cache|config|owners|rate_limit)\.h$",
     "the Kubernetes client side (client, informers, kubeconfig, owner reads)"),
    (r"slurm/(client|job_watch|token_source)\.h$",
     "the Slurm client side (client, job watch, token files)"),
    (r"common/files\.h$", "file reading (common/files.h)"),
    (r"wiring/", "the config file and client settings (wiring/)"),
]
BRIDGE_ANGLED = [
    (r"boost/(asio|beast)", "Asio/Beast"),
    (r"(fstream|iostream|filesystem)$", "file and console streams"),
    (r"(sys/.*|unistd\.h|fcntl\.h)$", "system calls"),
    (r"spdlog/", "logging (return warnings instead)"),
    (r"openssl/", "TLS"),
]

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

files = []
for dirpath, dirnames, filenames in os.walk(os.path.join(root, "src")):
    dirnames.sort()
    for name in sorted(filenames):
        if name.endswith((".h", ".cc")):
            files.append(os.path.relpath(os.path.join(dirpath, name), os.path.join(root, "src")))


def folder(path):
    parts = path.split("/")
    return parts[0] if len(parts) > 1 else ""


def unit(path):
    return re.sub(r"\.(h|cc)$", "", path)


def is_test(path):
    return path.endswith("_test.cc")


problems = []
edges = defaultdict(dict)  # unit -> {included unit: "file:line"}
folder_edges = set()
src_files = set(files)
for f in files:
    with open(os.path.join(root, "src", f), encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    here = folder(f)
    for n, text in enumerate(lines, 1):
        m = INCLUDE.match(text)
        if not m:
            continue
        quoted, inc = m.group(1) == '"', m.group(2)
        where = f"src/{f}:{n}"
        shown = f'"{inc}"' if quoted else f"<{inc}>"
        if here == "bridge" and not is_test(f):
            for pattern, what in BRIDGE_QUOTED if quoted else BRIDGE_ANGLED:
                if re.match(pattern, inc):
                    problems.append(f"{where} includes {shown}: bridge/ does no I/O, and this is "
                                    f"{what}")
        if not quoted:
            continue
        target = inc.split("/")[0] if "/" in inc else here
        if target == "testing":
            if not is_test(f):
                problems.append(f"{where} includes {shown}: only *_test.cc files include "
                                f"testing/ (move the test-only code to testing/)")
            continue
        if inc not in src_files:
            continue  # a generated header (common/version.h) or one outside src/
        edges[unit(f)].setdefault(unit(inc), where)
        if target == here:
            continue
        folder_edges.add((here, target))
        if here not in FLOORS or target not in FLOORS:
            missing = here if here not in FLOORS else target
            problems.append(f"{where}: src/{missing}/ has no floor in scripts/check-layers.sh "
                            f"(FLOORS; add it, and its line in docs/architecture.md)")
            continue
        up, mine = FLOORS[target], FLOORS[here]
        if up > mine or (up == mine and not is_test(f)):
            problems.append(f"{where} includes {shown}: {here or 'src'}/ (floor {mine}) may not "
                            f"include {target}/ (floor {up}); only lower floors")

# Rule 3: strongly connected components of the unit graph (Tarjan, iterative).
index, low, on_stack, stack, sccs = {}, {}, set(), [], []
counter = 0
for start in sorted(set(edges) | {u for e in edges.values() for u in e}):
    if start in index:
        continue
    work = [(start, iter(sorted(edges.get(start, {}))))]
    index[start] = low[start] = counter
    counter += 1
    stack.append(start)
    on_stack.add(start)
    while work:
        node, children = work[-1]
        child = next(children, None)
        if child is not None:
            if child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, {})))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[node])
        if low[node] == index[node]:
            scc = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                scc.append(top)
                if top == node:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

for scc in sorted(sccs):
    members = set(scc)
    # One cycle through the component's first unit (breadth-first, so the shortest), then every
    # include inside the component: any of them may be the one to cut.
    first = scc[0]
    back = {first: None}
    queue = [first]
    cycle = None
    while queue and cycle is None:
        node = queue.pop(0)
        for nxt in sorted(edges.get(node, {})):
            if nxt not in members or nxt == node:
                continue
            if nxt == first:
                cycle = [node]
                while back[cycle[-1]] is not None:
                    cycle.append(back[cycle[-1]])
                cycle.reverse()
                break
            if nxt not in back:
                back[nxt] = node
                queue.append(nxt)
    lines = [f"include cycle: {' -> '.join(cycle + [first])} (units: x.h with x.cc)"]
    for a in scc:
        for b, where in sorted(edges.get(a, {}).items()):
            if b in members and b != a:
                lines.append(f"    {where} ({a} -> {b})")
    problems.append("\n".join(lines))

if problems:
    for p in problems:
        print(f"check-layers: {p}")
    print(f"check-layers: {len(problems)} problem{'s' if len(problems) != 1 else ''} "
          f"(rules: scripts/check-layers.sh; folders: docs/architecture.md)", file=sys.stderr)
    sys.exit(1)
print(f"check-layers: {len(files)} files, {len(folder_edges)} folder edges, none upward; "
      f"bridge/ includes no I/O header; no include cycle")
EOF
