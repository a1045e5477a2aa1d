#!/usr/bin/env python3
"""Bandwidth figures of measured megakernel verdicts: for each
`--eval NAME=VERDICT.json[:POS]` it takes the bytes one decode step really
streams from the verdict's `streamed_mb` (amk's one definition,
ir.Program.StreamedBytes: every weight read once, an embedding table counted
by the rows it gathers, the K and V rows attention reads), and prints GB/s and
the percentage of the HBM bandwidth: the datasheet's (--hbm-gbs) and the copy
bandwidth measured in the same run (--copy COPY.json from copy_bw.py).
Median, p10 and p90 come from the verdict (latency_us and its notes). A
verdict that is not correct=true with a measured-gpu latency is reported, not
counted. Writes a Markdown table to stdout and JSON to --json."""
import argparse
import json
import re
import sys


def percentiles(notes):
    for n in notes or []:
        m = re.search(r"median ([0-9.]+) us over (\d+) samples.*\(p10 ([0-9.]+), p90 ([0-9.]+)", n)
        if m:
            return float(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--eval", action="append", default=[], help="NAME=VERDICT.json[:POS]")
    p.add_argument("--copy", help="copy_bw.py output")
    p.add_argument("--hbm-gbs", type=float, required=True, help="the datasheet HBM bandwidth of the device, GB/s")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    copy = None
    if args.copy:
        try:
            copy = json.load(open(args.copy))["median_gbs"]
        except Exception as e:
            print(f"copy bandwidth unreadable: {e}", file=sys.stderr)
    rows = []
    print("| model | pos | median us | p10 | p90 | samples | streamed MB | GB/s | % of datasheet HBM | % of measured copy |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for spec in args.eval:
        name, _, rest = spec.partition("=")
        parts = rest.split(":")
        try:
            v = json.load(open(parts[0]))
        except Exception as e:
            print(f"| {name} | | unreadable: {e} |")
            continue
        pos = int(parts[1]) if len(parts) > 1 else 0
        if not (v.get("correct") and v.get("latency_kind") == "measured-gpu" and v.get("latency_us")):
            print(f"| {name} | {pos} | no measured-gpu latency with a correctness PASS (correct={v.get('correct')}) |")
            continue
        if not v.get("streamed_mb"):
            print(f"| {name} | {pos} | the verdict has no streamed_mb |")
            continue
        streamed = v["streamed_mb"] * 1e6
        med = v["latency_us"]
        pct = percentiles(v.get("notes"))
        p10, p90, n = (pct[2], pct[3], pct[1]) if pct else (None, None, None)
        gbs = streamed / (med * 1e-6) / 1e9
        row = {"model": name, "pos": pos, "median_us": med, "p10_us": p10, "p90_us": p90, "samples": n,
               "streamed_bytes": streamed, "gbs": gbs, "pct_hbm_datasheet": 100 * gbs / args.hbm_gbs,
               "pct_copy": 100 * gbs / copy if copy else None, "copy_gbs": copy}
        rows.append(row)
        fmt = lambda x, f="%.1f": (f % x) if x is not None else "-"
        print(f"| {name} | {pos} | {med:.1f} | {fmt(p10)} | {fmt(p90)} | {fmt(n, '%d')} | {streamed / 1e6:.1f} | {gbs:.0f} | "
              f"{row['pct_hbm_datasheet']:.1f} | {fmt(row['pct_copy'])} |")
    if copy:
        print(f"\nmeasured copy bandwidth (read + write): {copy:.0f} GB/s; datasheet HBM: {args.hbm_gbs:.0f} GB/s")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
