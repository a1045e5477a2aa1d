#!/usr/bin/env bash
# ensure-nvcc.sh: the CUDA compiler of the kernel compile smoke of `make test`
# (kernels/build TestKernelsCompileWithoutSpills, kernels/gpu
# TestRingPlanOnTheHost), installed into this checkout and nowhere else, so
# that whether those tests run depends only on what `make test` installs:
#
#   .cache/cuda-12.4   Debian trixie's nvcc 12.4 (compiles sm_90a, the streaming
#                      ring's TMA path included). About 1 GB to download once
#                      per checkout (the CUDA headers come in a 934 MB package),
#                      230 MB kept.
#   .cache/cuda-11.8   Debian bookworm's nvcc 11.8, only when 12.4 cannot be
#                      fetched: it compiles sm_90 and not the TMA path, and the
#                      tests say so.
#
# Both come from scripts/gpu/debian-cuda.sh (no root, nothing installed
# system-wide). When neither can be fetched (no Debian mirror, no network), this
# says so, writes the reason into .cache/cuda-install.log, and the tests skip
# with a message; it never fails the build. AMK_NO_NVCC=1 skips the download
# (the tests then skip too, saying so). The kernel tests and `amkctl doctor`
# find the compiler with the same lookup (kernels/build.FindNVCC).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache"
if [ -f "$cache/cuda-12.4/.nvcc-done" ]; then
	exit 0
fi
if [ -n "${AMK_NO_NVCC:-}" ]; then
	echo "nvcc: AMK_NO_NVCC is set, so no nvcc is installed: the kernel compile smoke will skip"
	exit 0
fi
mkdir -p "$cache"
log="$cache/cuda-install.log"
: >"$log"
fetch() { # release
	timeout 1200 "$root/scripts/gpu/debian-cuda.sh" --release "$1" --nvcc --dir "$cache/cuda-$1" >>"$log" 2>&1
}
start=$(date +%s)
echo "nvcc: installing Debian trixie's CUDA 12.4 nvcc into .cache/cuda-12.4 for the kernel compile smoke" \
	"(about 1 GB to download once per checkout; progress in .cache/cuda-install.log)"
if fetch 12.4; then
	echo "nvcc: $(grep -m1 -o 'release 12.4, V[0-9.]*' "$log") installed in $(($(date +%s) - start)) s"
	exit 0
fi
echo "nvcc: COULD NOT install nvcc 12.4; the last lines of .cache/cuda-install.log:"
tail -n 3 "$log" | sed 's/^/    /'
if [ -f "$cache/cuda-11.8/.nvcc-done" ]; then
	echo "nvcc: FALLING BACK to this checkout's nvcc 11.8 (.cache/cuda-11.8): the smoke compiles sm_90, without the TMA path"
	exit 0
fi
echo "nvcc: FALLING BACK to Debian bookworm's CUDA 11.8 nvcc (sm_90 only, no TMA path) into .cache/cuda-11.8"
if fetch 11.8; then
	echo "nvcc: nvcc 11.8 installed: the kernel compile smoke compiles sm_90, without the TMA path, and says so"
	exit 0
fi
echo "nvcc: NO nvcc could be installed (see .cache/cuda-install.log): the kernel compile smoke and the ring-plan test will SKIP"
tail -n 3 "$log" | sed 's/^/    /'
exit 0
