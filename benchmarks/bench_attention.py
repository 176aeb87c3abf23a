"""Derivation time of the layerwise actions of lightning attention, exactly.

Layerwise-equivariant attention models (pairs of heads swapped by the patch mirror, the rest
fixed), scrambled by random head permutations and random GL matrices; we time
`derive_latent_actions` (which includes every exact check) against the number of heads and the
channel width d.

    python benchmarks/bench_attention.py [--quick] [--out DIR]
"""

import argparse
import math
import sys
import time
from pathlib import Path

from _common import write_results

from symeq.attention import patch_mirror, random_equivariant_attention, scramble_attention
from symeq.layerwise import derive_latent_actions


def head_perm(H):
    perm = list(range(H))
    for h in range(0, H // 2 - H // 2 % 2, 2):
        perm[h], perm[h + 1] = h + 1, h
    return perm


def case(H, ph, pw, seed=0, repeats=2):
    G = patch_mirror(2 * ph, 2 * pw, ph, pw)  # 4 tokens, d = ph * pw
    m = scramble_attention(random_equivariant_attention(G, tokens=4, head_perms=[head_perm(H)], rng=seed), rng=seed + 1)
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        d = derive_latent_actions(m)
        best = min(best, time.perf_counter() - t)
    assert d.found, d.failure
    return {"heads": H, "d": ph * pw, "tokens": 4, "params": m.n_params, "seconds": best}


def slope(rows, key):
    xs = [math.log(r[key]) for r in rows]
    ys = [math.log(r["seconds"]) for r in rows]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    heads = [2, 4] if args.quick else [2, 4, 8, 16, 32]
    widths = [(1, 2), (2, 2)] if args.quick else [(2, 2), (2, 4), (4, 4), (4, 8), (8, 8)]
    by_heads, by_width = [], []
    for H in heads:
        print(f"heads {H}", file=sys.stderr)
        by_heads.append(case(H, 2, 2))
    for ph, pw in widths:
        print(f"d {ph * pw}", file=sys.stderr)
        by_width.append(case(4, ph, pw))
    lines = ["| heads | d | params | derive (s) |", "|---:|---:|---:|---:|"]
    lines += [f"| {r['heads']} | {r['d']} | {r['params']} | {r['seconds']:.3g} |" for r in by_heads + by_width]
    lines.append("")
    lines.append(f"time ~ heads^{slope(by_heads, 'heads'):.2f} (d = 4); time ~ d^{slope(by_width, 'd'):.2f} (4 heads)")
    table = "\n".join(lines)
    print(table)
    write_results(args.out, "attention", table, {"by_heads": by_heads, "by_width": by_width})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
