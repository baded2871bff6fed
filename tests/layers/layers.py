#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Checks the layering that doc/ARCHITECTURE.md promises, from the objects.

  layers.py BUILD_DIR        (from the top of the tree)

Reads every object of librdcp (BUILD_DIR/{util,cm,transfer,cmd}/**.o) with
nm: file A calls file B when A has an undefined global symbol that B
defines. Then, as TAP:
  - calls go one way, cmd -> transfer -> cm -> util: no object of a lower
    module calls one of a higher module;
  - inside transfer/, wings call only their own wing or the wings below
    (wire < session < fs, walk < source, sink < client, server);
  - no circle of calls among transfer/'s files (each wing is a DAG);
  - no circle of calls among cm/'s files (each transport's files a DAG:
    setup -> ops -> lanes -> resources -> the bottom; doc/ARCHITECTURE.md).
A failure names the files and the symbols that tie them.
"""
import os
import subprocess
import sys

MODULES = {"util": 0, "cm": 1, "transfer": 2, "cmd": 3}
WINGS = {"wire": 0, "session": 1, "fs": 2, "walk": 2, "source": 3,
         "sink": 3, "client": 4, "server": 4}

build = sys.argv[1] if len(sys.argv) > 1 else "build"
objs = []
for mod in MODULES:
    for root, _, files in os.walk(os.path.join(build, mod)):
        objs += [os.path.join(root, f) for f in files if f.endswith(".o")
                 # an object whose source moved or went is stale
                 and os.path.exists(os.path.relpath(
                     os.path.join(root, f), build)[:-2] + ".c")]
if not objs:
    print("not ok 1 - no objects under %s (build first)" % build)
    print("1..1")
    sys.exit(1)


def nm(args, obj):
    out = subprocess.run(["nm"] + args + [obj], capture_output=True,
                         text=True, check=True).stdout
    return [l.split() for l in out.splitlines() if l.strip()]


def name(obj):
    return os.path.relpath(obj, build)[:-2] + ".c"


defs = {}
for o in objs:
    for f in nm(["--defined-only", "-g"], o):
        if len(f) == 3 and f[1] in "TDBRVW":
            defs[f[2]] = name(o)
calls = {}
for o in objs:
    a = name(o)
    for f in nm(["-u"], o):
        b = defs.get(f[-1])
        if b and b != a:
            calls.setdefault(a, {}).setdefault(b, []).append(f[-1])

n = 0
failed = 0


def check(ok, what, detail):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
    if not ok:
        failed += 1
        for d in detail:
            print("#   " + d)


def tie(a, b):
    return "%s -> %s: %s" % (a, b, " ".join(sorted(calls[a][b])))


up = [tie(a, b) for a in calls for b in calls[a]
      if MODULES[a.split("/")[0]] < MODULES[b.split("/")[0]]]
check(not up, "calls go one way: cmd -> transfer -> cm -> util", up)

wing_up = []
for a in calls:
    for b in calls[a]:
        pa, pb = a.split("/"), b.split("/")
        if pa[0] != "transfer" or pb[0] != "transfer" or len(pa) < 3 \
                or len(pb) < 3:
            continue
        if pa[1] not in WINGS or pb[1] not in WINGS:
            wing_up.append("%s or %s is in no known wing" % (a, b))
        elif pa[1] != pb[1] and WINGS[pa[1]] <= WINGS[pb[1]]:
            wing_up.append(tie(a, b))
check(not wing_up, "transfer/'s wings call only the wings below them",
      wing_up)

# Circles: Tarjan's strongly connected components over one module's files.
def circles_in(mod):
    nodes = sorted({a for a in calls if a.startswith(mod)})
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in calls.get(v, {}):
            if not w.startswith(mod):
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in nodes:
        if v not in index:
            strong(v)
    out = []
    for comp in sccs:
        out.append("circle: " + ", ".join(comp))
        out += ["  " + tie(a, b) for a in comp for b in calls.get(a, {})
                if b in comp]
    return out


sys.setrecursionlimit(10000)
for mod in ("transfer/", "cm/"):
    found = circles_in(mod)
    check(not found, "no circle of calls among %s's files" % mod, found)

print("1..%d" % n)
sys.exit(1 if failed else 0)
