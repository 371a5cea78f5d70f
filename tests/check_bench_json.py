"""Checks what `pit bench --json` wrote: every point correct, and the floors
present and positive (the memory floor, and the L2 floor of the plan that
ran at the L2 bandwidth measured in the run). Usage: check_bench_json.py FILE
SUITE, SUITE being matmul, decode, moe, attention or all."""
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


def check_points(d, suite, keys, where):
    """The rows of a suite with a copy bandwidth: each correct, each key positive."""
    rows = d[suite]
    assert rows, f"no {suite} points"
    positive(d, f"{suite}_copy_gbps", suite)
    for r in rows:
        assert r["correct"], f"{where(r)}: wrong result (rel. error {r['rel_error']})"
        for key in keys:
            positive(r, key, where(r))
    skipped = set(d[f"{suite}_skipped"])
    assert not skipped & {r["dtype"] for r in rows}, f"{suite}: {skipped} both skipped and run"
    return rows


def check_decode(d):
    rows = check_points(d, "decode", ("pit_ms", "dense_ms", "floor_ms", "l2_bytes", "l2_floor_ms",
                                      "dense_over_pit", "pit_over_floor"),
                        lambda r: f"decode {r['dtype']} M={r['m']} K={r['k']} N={r['n']} s={r['sparsity']}")
    for dtype in {r["dtype"] for r in rows}:
        points = {(r["m"], r["k"], r["n"], r["sparsity"]) for r in rows if r["dtype"] == dtype}
        assert {p[0] for p in points} == {1, 4, 16, 64}, f"decode {dtype}: token counts {points}"
        assert len({(p[1], p[2]) for p in points}) == 2, f"decode {dtype}: shapes {points}"
        assert len(points) == 16, f"decode {dtype}: {len(points)} points, not 16"
    return len(rows)


def check_moe(d):
    rows = check_points(d, "moe", ("pit_ms", "dense_ms", "loop_ms", "floor_ms", "flops", "floor_bytes",
                                   "pit_over_dense", "pit_over_floor", "routed_experts", "backward_ms",
                                   "backward_over_forward", "keeping_forward_ms", "kept_backward_ms",
                                   "kept_backward_over_forward"),
                        lambda r: f"moe {r['dtype']} {r['model']} T={r['t']}")
    for r in rows:
        where = f"moe {r['dtype']} {r['model']} T={r['t']}"
        assert r["busiest_over_mean"] >= 1, f"{where}: busiest expert below the mean load"
        assert r["routed_experts"] <= r["e"], f"{where}: {r['routed_experts']} of {r['e']} experts routed"
    for dtype in {r["dtype"] for r in rows}:
        points = [(r["model"], r["t"]) for r in rows if r["dtype"] == dtype]
        assert len(set(points)) == len(points) == 8, f"moe {dtype}: points {points}"
        assert {"mixtral-8x7b", "qwen3-30b-a3b"} <= {p[0] for p in points}, f"moe {dtype}: targets {points}"
    return len(rows)


def check_attention(d):
    rows = d["attention"]
    assert rows, "no attention points"
    positive(d, "attention_copy_gbps", "attention")
    for r in rows:
        where = f"attention {r['dtype']} {r['kind']} Hq={r['hq']} L={r['lq']}/{r['lk']} D={r['head_dim']}"
        assert r["ok"], f"{where}: wrong result (rel. error {r['rel_error']})"
        positive(r, "pit_ms", where)
        if r["kind"] != "decode":  # the backward: every gradient, beside the forward
            positive(r, "backward_ms", where)
            positive(r, "backward_over_forward", where)
    for dtype in {r["dtype"] for r in rows}:
        kinds = {r["kind"] for r in rows if r["dtype"] == dtype}
        assert kinds == {"window", "blocks", "causal", "decode"}, f"attention {dtype}: kinds {kinds}"
    return len(rows)


def main(path, suite):
    with open(path) as f:
        d = json.load(f)
    if suite in ("matmul", "decode", "all"):  # the suites with an L2 floor
        positive(d["l2"], "gbps", "l2")
        positive(d["l2"], "copy_bytes", "l2")
    told = []
    if suite in ("matmul", "all"):
        told.append(f"{check_matmul(d)} matmul points")
    if suite in ("decode", "all"):
        told.append(f"{check_decode(d)} decode points")
    if suite in ("moe", "all"):
        told.append(f"{check_moe(d)} moe points")
    if suite in ("attention", "all"):
        told.append(f"{check_attention(d)} attention points")
    l2 = f" (L2 {d['l2']['gbps']:.1f} GB/s)" if "l2" in d else ""
    print(", ".join(told), "in", path + l2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
