#!/usr/bin/env bash
# build-bin.sh (`make gpu-bin`): the binaries a GPU visit carries in bin/,
# built here because the GPU machine has no Go and only CUDA 13 headers,
# which gorgonia.org/cu does not compile against. Fetches Debian's CUDA 11.8
# cuda.h and stub libcuda.so first (scripts/gpu/debian-cuda.sh), then builds
# with -tags cuda, stripped:
#   bin/amkctl, bin/gpuworker                     the verbs and the daemon
#   bin/launch.test, bin/gpu.test, bin/tune.test  the cuda GPU tests
#   bin/build.test                                the kernel build check (the visit's cache warm-up)
#   bin/MANIFEST                                  commit, toolchain, sizes
# The binaries need only glibc (>= 2.34) and libcuda.so.1 at run time.
# They are left gzip-compressed (bin/NAME.gz): uncompressed they come to about
# 60 MB, and the device tool carries at most 64 MiB together with the working
# tree. scripts/gpu/lib.sh (visit_start) unpacks them on the GPU machine;
# `gzip -dk bin/*.gz` unpacks them here.
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
dir=$(scripts/gpu/debian-cuda.sh)
export CGO_ENABLED=1
export CGO_CFLAGS="-I$dir/usr/include"
export CGO_LDFLAGS="-L$dir/usr/lib/x86_64-linux-gnu/stubs"
flags=(-tags cuda -trimpath -ldflags=-s\ -w)
echo "go vet -tags cuda (kernels, amkctl, gpuworker)" >&2
$GO vet -tags cuda ./kernels/... ./cmd/amkctl ./cmd/gpuworker
mkdir -p bin
$GO build "${flags[@]}" -o bin/amkctl ./cmd/amkctl
$GO build "${flags[@]}" -o bin/gpuworker ./cmd/gpuworker
for p in launch gpu tune build; do
	$GO test -c "${flags[@]}" -o "bin/$p.test" "./kernels/$p"
done
bins=(bin/amkctl bin/gpuworker bin/launch.test bin/gpu.test bin/tune.test bin/build.test)
for b in "${bins[@]}"; do
	if ! objdump -p "$b" | grep -q 'NEEDED.*libcuda.so.1' && [ "$b" != bin/build.test ]; then
		echo "build-bin.sh: $b does not link libcuda.so.1" >&2
		exit 1
	fi
done
{
	echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
	echo "built $(date -u +%FT%TZ) with $($GO version | cut -d' ' -f3-), -tags cuda, CUDA 11.8 headers (Debian)"
	echo "glibc needed: $(objdump -T bin/amkctl | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)"
	du -b "${bins[@]}" | awk '{printf "%s %.1f MB\n", $2, $1 / 1e6}'
} >bin/MANIFEST
rm -f bin/*.gz
gzip -9 "${bins[@]}"
cat bin/MANIFEST
carried=$(($(du -sb bin | cut -f1) + $(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)))
echo "bin/ compressed: $(du -sh bin | cut -f1); with the working tree $((carried / 1048576)) MiB of the device tool's 64 MiB"
if [ "$carried" -gt $((60 * 1048576)) ]; then
	echo "build-bin.sh: bin/ and the working tree come to more than 60 MiB; a GPU visit could not carry them" >&2
	exit 1
fi
