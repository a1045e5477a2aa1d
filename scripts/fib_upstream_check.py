#!/usr/bin/env python3
"""Validate a FlashInfer-Bench dataset directory with flashinfer-bench's own
pydantic models, without PyTorch.

usage: fib_upstream_check.py FLASHINFER_BENCH_CHECKOUT DATASET_DIR...

FLASHINFER_BENCH_CHECKOUT is a checkout of github.com/flashinfer-ai/flashinfer-bench;
only its flashinfer_bench/data/*.py modules (and pydantic) are loaded: the package
__init__ files, which import torch, are bypassed. Every definitions/**/*.json is
checked as a Definition (reference parses as Python with a top-level run, shapes
name defined axes, constraints parse, input/output names disjoint), every
workloads/**/*.jsonl and traces/**/*.jsonl line as a Trace, and every
solutions/**/*.json as a Solution. Exit 0 when everything validates, 1 otherwise.
"""
import pathlib
import sys
import types


def load_models(checkout):
    root = pathlib.Path(checkout) / "flashinfer_bench"
    for name, sub in (("flashinfer_bench", root), ("flashinfer_bench.data", root / "data")):
        module = types.ModuleType(name)
        module.__path__ = [str(sub)]
        sys.modules[name] = module
    from flashinfer_bench.data.definition import Definition
    from flashinfer_bench.data.solution import Solution
    from flashinfer_bench.data.trace import Trace

    assert "torch" not in sys.modules
    return Definition, Trace, Solution


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    Definition, Trace, Solution = load_models(argv[1])
    checked, failed = 0, 0
    for dataset in argv[2:]:
        root = pathlib.Path(dataset)
        for path in sorted(root.rglob("*.json*")):
            parts = path.relative_to(root).parts
            if path.suffix == ".jsonl":
                items = [(f"{path}:{i}", line) for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
                model = Trace
            else:
                items = [(str(path), path.read_text())]
                model = Solution if "solutions" in parts else Definition
            for where, text in items:
                checked += 1
                try:
                    model.model_validate_json(text)
                except Exception as err:  # pydantic.ValidationError, or ValueError from a validator
                    failed += 1
                    first = str(err).splitlines()
                    print(f"{where}: {model.__name__}: {' | '.join(first[:3])}")
    print(f"flashinfer-bench models: {checked} records checked, {failed} rejected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
