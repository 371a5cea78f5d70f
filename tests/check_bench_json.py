"""Checks what `pit bench --json` wrote: every point correct, and the floors
present and positive (the memory floor, and the L2 floor of the plan that
ran at the L2 bandwidth measured in the run). Usage: check_bench_json.py FILE
SUITE, SUITE being matmul, decode or all."""
import json
import sys


def positive(row, key, where):
    value = row.get(key)
    assert isinstance(value, (int, float)) and value > 0, f"{where}: {key} = {value!r}"


def check_matmul(d):
    rows = d["matmul"]
    assert rows, "no matmul points"
    for r in rows:
        where = f"matmul {r['dtype']} {r['granularity']} s={r['sparsity']}"
        assert r["correct"], f"{where}: wrong result"
        for key in ("pit_ms", "dense_ms", "floor_ms", "l2_bytes", "l2_floor_ms"):
            positive(r, key, where)
    return len(rows)


def check_decode(d):
    rows = d["decode"]
    assert rows, "no decode points"
    positive(d, "decode_copy_gbps", "decode")
    for r in rows:
        where = f"decode {r['dtype']} M={r['m']} K={r['k']} N={r['n']} s={r['sparsity']}"
        assert r["correct"], f"{where}: wrong result (rel. error {r['rel_error']})"
        for key in ("pit_ms", "dense_ms", "floor_ms", "l2_bytes", "l2_floor_ms", "dense_over_pit",
                    "pit_over_floor"):
            positive(r, key, where)
    for dtype in {r["dtype"] for r in rows}:
        points = {(r["m"], r["k"], r["n"], r["sparsity"]) for r in rows if r["dtype"] == dtype}
        assert {p[0] for p in points} == {1, 4, 16, 64}, f"decode {dtype}: token counts {points}"
        assert len({(p[1], p[2]) for p in points}) == 2, f"decode {dtype}: shapes {points}"
        assert len(points) == 16, f"decode {dtype}: {len(points)} points, not 16"
    skipped = set(d["decode_skipped"])
    assert not skipped & {r["dtype"] for r in rows}, f"decode: {skipped} both skipped and run"
    return len(rows)


def main(path, suite):
    with open(path) as f:
        d = json.load(f)
    positive(d["l2"], "gbps", "l2")
    positive(d["l2"], "copy_bytes", "l2")
    told = []
    if suite in ("matmul", "all"):
        told.append(f"{check_matmul(d)} matmul points")
    if suite in ("decode", "all"):
        told.append(f"{check_decode(d)} decode points")
    print(", ".join(told), "in", path, f"(L2 {d['l2']['gbps']:.1f} GB/s)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
