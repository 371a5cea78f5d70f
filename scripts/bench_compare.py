#!/usr/bin/env python3
"""Compares `pit bench --json` files of two builds point by point.

usage: bench_compare.py --base A1.json [A2.json ...] --new B1.json [B2.json ...] [--limit 0.03]

Each point's pit time is the median over the files of its build (runs
alternated in one device call). Prints one row a point with new/base and
flags a point outside the limit; exits 1 if any point is outside it or a
point's result was not checked correct.
"""
import argparse
import json
import statistics
import sys


def points(path):
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for r in doc.get("matmul", []):
        key = "matmul %s %s s=%.2f" % (r["dtype"], r["granularity"], r["sparsity"])
        out[key] = (r["pit_ms"], r["correct"], r["choice"])
    for r in doc.get("decode", []):
        key = "decode %s M=%d K=%d s=%.2f" % (r["dtype"], r["m"], r["k"], r["sparsity"])
        out[key] = (r["pit_ms"], r["correct"], r["choice"])
    for r in doc.get("layers", []):
        key = "layer %s %s" % (r.get("layer", "?"), r.get("dtype", ""))
        out[key] = (r["pit_ms"], r.get("correct", r.get("ok", True)), r.get("choice", ""))
    return out


def gather(paths):
    """point -> its results in every file that has it (files of several suites mix)"""
    out = {}
    for p in paths:
        for k, v in points(p).items():
            out.setdefault(k, []).append(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--limit", type=float, default=0.03)
    a = ap.parse_args()
    base, new = gather(a.base), gather(a.new)
    bad = 0
    print("%-34s %10s %10s %7s  %s" % ("point", "base ms", "new ms", "new/base", "choice (new)"))
    for k in base:
        if k not in new:
            print("%-34s missing in the new build" % k)
            bad += 1
            continue
        b = statistics.median(x[0] for x in base[k])
        n = statistics.median(x[0] for x in new[k])
        ok = all(x[1] for x in new[k])
        ratio = n / b if b > 0 else float("inf")
        flag = "" if abs(ratio - 1) <= a.limit and ok else "  <-- outside" if ok else "  <-- NOT CORRECT"
        bad += flag != ""
        print("%-34s %10.4f %10.4f %7.3f  %s%s" % (k, b, n, ratio, new[k][0][2], flag))
    print("%d point(s) outside +-%.0f%%" % (bad, a.limit * 100))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
