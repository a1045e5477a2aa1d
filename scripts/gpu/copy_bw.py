#!/usr/bin/env python3
"""Device-to-device copy bandwidth of GPU 0 through PyTorch: a 2 GiB buffer
copied --reps times after warm-up, each copy between two CUDA events, counting
bytes read plus bytes written. Prints one JSON object (median, p10, p90 GB/s).
The ceiling the megakernel's streamed bytes are compared with (METHOD.md)."""
import argparse
import json
import statistics


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bytes", type=int, default=2 << 30)
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args()
    import torch
    x = torch.randint(0, 255, (args.bytes,), dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gbs = []
    for _ in range(args.reps):
        s.record()
        y.copy_(x)
        e.record()
        e.synchronize()
        gbs.append(2 * args.bytes / (s.elapsed_time(e) / 1e3) / 1e9)
    gbs.sort()
    print(json.dumps({"device": torch.cuda.get_device_name(0), "bytes": args.bytes, "reps": args.reps,
                      "median_gbs": statistics.median(gbs), "p10_gbs": gbs[len(gbs) // 10],
                      "p90_gbs": gbs[(len(gbs) * 9) // 10], "counting": "bytes read + bytes written"}))


if __name__ == "__main__":
    main()
