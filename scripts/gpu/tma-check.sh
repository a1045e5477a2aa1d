#!/usr/bin/env bash
# tma-check.sh [STAGESxTILE ...]: assemble the streaming ring's TMA path without
# a GPU and without nvcc >= 12 (docs/results/cuda-review.md).
#
# Debian's nvcc 11.8 compiles the kernels for sm_90 but never the TMA branch of
# kernels/cuda/ring.cuh (AMK_RING_TMA: cp.async.bulk + mbarrier, PTX ISA 8.0,
# which needs nvcc >= 12), so its inline PTX would first meet an assembler on
# the GPU machine. Here: a copy of the kernel sources with that branch's nvcc
# version condition lowered to 11; nvcc 11.8 emits PTX (inline asm passes
# through unchecked); its .version is raised to 8.0; ptxas 12.4 from Debian
# trixie (scripts/gpu/debian-cuda.sh --ptxas12, fetched once) assembles every
# kernel for sm_90. It fails on a ptxas error or a spill, and prints the
# megakernel's resources and the TMA instructions its SASS holds (UBLKCP: bulk
# copies; SYNCS: mbarrier arrive/wait/init; FENCE.VIEW.ASYNC: proxy fences).
# Default ring shapes: 8x1024 and 12x2048 (the ring_stages x ring_tile search
# extremes). About a minute per shape here. A syntax and resource check, not a
# correctness one.
set -euo pipefail
cd "$(dirname "$0")/../.."
shapes=("$@")
[ ${#shapes[@]} -eq 0 ] && shapes=(8x1024 12x2048)
dir=$(scripts/gpu/debian-cuda.sh --nvcc)
ptxas_dir=$(scripts/gpu/debian-cuda.sh --ptxas12)
export PATH="$ptxas_dir:$PATH" # cuobjdump -sass runs nvdisasm
work=$(mktemp -d "${TMPDIR:-/tmp}/amk-tma-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp -r kernels/abi.h kernels/cuda "$work/src/"
cond='__CUDACC_VER_MAJOR__ >= 12 \&\& AMK_RING_BULK'
grep -q "__CUDACC_VER_MAJOR__ >= 12 && AMK_RING_BULK" "$work/src/cuda/ring.cuh" || {
	echo "tma-check.sh: ring.cuh no longer selects the TMA path by '__CUDACC_VER_MAJOR__ >= 12 && AMK_RING_BULK'; update this script" >&2
	exit 2
}
sed -i "s/$cond/__CUDACC_VER_MAJOR__ >= 11 \\&\\& AMK_RING_BULK/" "$work/src/cuda/ring.cuh"
for shape in "${shapes[@]}"; do
	stages=${shape%x*} tile=${shape#*x}
	echo "== ring ${stages} x ${tile} B"
	"$dir/bin/nvcc" -std=c++17 -O3 -arch=sm_90 --ptx -DAMK_RING_STAGES="$stages" -DAMK_RING_TILE_BYTES="$tile" \
		-o "$work/tma.ptx" "$work/src/cuda/megakernel.cu"
	sed -i 's/^\.version 7\.[0-9]*$/.version 8.0/' "$work/tma.ptx"
	"$ptxas_dir/ptxas" -arch=sm_90 -O3 -v "$work/tma.ptx" -o "$work/tma.cubin" 2>"$work/ptxas.log" || {
		cat "$work/ptxas.log" >&2
		exit 1
	}
	if grep -E '[1-9][0-9]* bytes spill (stores|loads)' "$work/ptxas.log" >&2; then
		echo "tma-check.sh: a kernel spills registers at ring ${stages} x ${tile}" >&2
		exit 1
	fi
	grep -A3 "entry function 'amk_megakernel'" "$work/ptxas.log" | tail -2 | sed 's/^ *//'
	n=$("$ptxas_dir/cuobjdump" -sass -fun amk_megakernel "$work/tma.cubin" | grep -c 'UBLKCP' || true)
	"$ptxas_dir/cuobjdump" -sass -fun amk_megakernel "$work/tma.cubin" |
		grep -oE 'UBLKCP[.A-Z]*|SYNCS[.A-Z0-9]*|FENCE\.VIEW\.ASYNC[.A-Z]*' | sort | uniq -c
	if [ "$n" -eq 0 ]; then
		echo "tma-check.sh: no bulk copy (UBLKCP) in amk_megakernel: the TMA path was not compiled" >&2
		exit 1
	fi
done
echo "tma-check.sh: the TMA path assembles for sm_90 at ${shapes[*]}"
