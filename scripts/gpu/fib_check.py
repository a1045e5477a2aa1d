#!/usr/bin/env python3
"""Check amk's micro-kernels against FlashInfer-Bench Definitions' PyTorch references.

Needs PyTorch. Not run on the build machine (no GPU, no torch there): written for a
GPU session, kept simple on purpose.

    amkctl fib export small --gpu h100 -o /tmp/fib-small
    amkctl tune-instruction --fib /tmp/fib-small --gpu h100 --device cuda --budget 1 --dump /tmp/fib-dump
    python3 scripts/gpu/fib_check.py /tmp/fib-small /tmp/fib-dump

For every dumped case (one workload of one Definition), this loads the inputs amk's
micro-kernel ran on, reshapes them to the Definition's shapes at the workload's axes,
casts them to the Definition's dtypes (exact: amk stored them already rounded), runs
the Definition's `reference` (its global `run`) on the GPU, and compares the result
with amk's outputs: the CUDA micro-kernel's (device_outputs, default -D variant) and
the reference VM's (outputs). Exit 0 when every comparison passes, 1 otherwise.

Tolerances follow amk's vm.Tolerance: fp32 atol 1e-4 rtol 1e-4, fp16 1e-2/1e-2,
bf16 2e-2/2e-2 (|amk - ref| <= atol + rtol * |ref|).
"""
import json
import pathlib
import sys

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int32": torch.int32, "int64": torch.int64}
TOLERANCE = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def load_definitions(dataset):
    defs = {}
    for path in pathlib.Path(dataset).rglob("definitions/**/*.json"):
        d = json.loads(path.read_text())
        defs[d["name"]] = d
    workloads = {}
    for path in pathlib.Path(dataset).rglob("workloads/**/*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                workloads[entry["workload"]["uuid"]] = entry["workload"]
    return defs, workloads


def shape_of(spec, definition, axes):
    dims = []
    for name in spec["shape"]:
        axis = definition["axes"][name]
        dims.append(axis["value"] if axis["type"] == "const" else axes[name])
    return dims


def read_tensor(case_dir, entry, shape, dtype, device):
    raw = (case_dir / entry["file"]).read_bytes()
    kind = torch.int32 if entry["amk_dtype"] in ("I32", "I8", "U8", "BOOL") else torch.float32
    t = torch.frombuffer(bytearray(raw), dtype=kind).reshape(shape)
    return t.to(device=device, dtype=dtype)


def check_case(case_dir, defs, workloads, device):
    case = json.loads((case_dir / "case.json").read_text())
    d = defs[case["definition"]]
    axes = workloads[case["workload"]]["axes"]
    namespace = {}
    exec(compile(d["reference"], d["name"], "exec"), namespace)
    args = []
    for name, spec in d["inputs"].items():
        if spec["shape"] is None:
            value = case["scalars"][name]
            args.append(int(value) if spec["dtype"].startswith("int") else float(value))
            continue
        args.append(read_tensor(case_dir, case["inputs"][name], shape_of(spec, d, axes), DTYPES[spec["dtype"]], device))
    with torch.no_grad():
        result = namespace["run"](*args)
    if not isinstance(result, (tuple, list)):
        result = (result,)
    lines, ok = [], True
    for (name, spec), ref in zip(d["outputs"].items(), result):
        shape = shape_of(spec, d, axes)
        atol, rtol = TOLERANCE.get(spec["dtype"], (0.0, 0.0))
        ref = ref.to(torch.float32).reshape(shape)
        for source in ("device_outputs", "outputs"):
            if name not in case.get(source, {}):
                continue
            got = read_tensor(case_dir, case[source][name], shape, torch.float32, device)
            err = (got - ref).abs()
            bad = err > atol + rtol * ref.abs()
            passed = not bool(bad.any()) and bool(torch.isfinite(got).all())
            ok = ok and passed
            who = "kernel" if source == "device_outputs" else "reference VM"
            lines.append(f"{'PASS' if passed else 'FAIL'} {d['name']} workload {case['workload']} {name}: amk {who} "
                         f"vs reference, max abs err {err.max().item():.3g}, {int(bad.sum())} of {bad.numel()} outside tolerance")
    return ok, lines


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    device = "cuda" if torch.cuda.is_available() else "cpu"
    defs, workloads = load_definitions(argv[1])
    all_ok, n = True, 0
    for case_json in sorted(pathlib.Path(argv[2]).rglob("case.json")):
        n += 1
        try:
            ok, lines = check_case(case_json.parent, defs, workloads, device)
        except Exception as err:  # a reference that does not run is a failure, reported per case
            ok, lines = False, [f"FAIL {case_json.parent}: {type(err).__name__}: {err}"]
        all_ok = all_ok and ok
        print("\n".join(lines))
    print(f"{n} cases checked on {device}: {'all pass' if all_ok and n else 'FAILURES' if n else 'nothing to check'}")
    return 0 if all_ok and n else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
