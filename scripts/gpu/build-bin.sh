#!/usr/bin/env bash
# build-bin.sh (`make gpu-bin`): the binaries a GPU visit carries in bin/,
# built here because the GPU machine has no Go and only CUDA 13 headers,
# which gorgonia.org/cu does not compile against. Fetches Debian's CUDA 11.8
# cuda.h and stub libcuda.so first (scripts/gpu/debian-cuda.sh), then builds
# with -tags cuda, stripped:
#   bin/amkctl, bin/gpuworker                     the verbs and the daemon
#   bin/launch.test, bin/gpu.test, bin/tune.test  the cuda GPU tests
#   bin/build.test                                the kernel build check (the visit's cache warm-up)
#   bin/kernels-nvcc12.tar.xz                     the visit's kernels (build.VisitVariants)
#                                                 compiled for sm_90a with nvcc 12.4
#   bin/MANIFEST                                  commit, toolchain, sizes
# The binaries need only glibc (>= 2.34) and libcuda.so.1 at run time. The
# kernels are the nvcc build cache's modules (cubin and metadata): the visit
# unpacks them into AMK_KERNEL_PREBUILT, so that the device loads them instead
# of waiting on its own nvcc (kernels/build, Builder.Prebuilt). The nvcc is
# $AMK_NVCC, else this checkout's .cache/cuda-12.4 (`make nvcc`); without an
# nvcc 12 or newer no kernels are carried and the visit compiles them on the
# device, saying so. The compiles are cached in .cache/visit-kernels/ (about
# 100 CPU-seconds a variant the first time).
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
rm -f bin/*.gz bin/kernels-*.tar.*
gzip -9 "${bins[@]}"

# The visit's kernels, compiled here for sm_90a.
nvcc=${AMK_NVCC:-}
[ -z "$nvcc" ] && [ -x .cache/cuda-12.4/bin/nvcc ] && nvcc=$PWD/.cache/cuda-12.4/bin/nvcc
release=$([ -n "$nvcc" ] && "$nvcc" --version 2>/dev/null | grep -o 'release [0-9]*' | cut -d' ' -f2)
if [ -z "$nvcc" ] || [ "${release:-0}" -lt 12 ]; then
	echo "build-bin.sh: no nvcc 12 or newer (${nvcc:-none}${release:+, release $release}): no kernels carried; the visit compiles them on the device (make nvcc, or set AMK_NVCC)" >&2
	echo "kernels: none carried (no nvcc 12)" >>bin/MANIFEST
else
	kcache=.cache/visit-kernels/$(cat kernels/abi.h kernels/cuda/*.cuh kernels/cuda/*.cu | sha256sum | cut -c1-16)
	mkdir -p "$kcache"
	echo "build-bin.sh: the visit's kernels with $nvcc (release $release) for sm_90a into $kcache" >&2
	AMK_NVCC=$nvcc AMK_KERNEL_CACHE=$PWD/$kcache AMK_KERNEL_VARIANTS=visit AMK_NVCC_ARCH=sm_90a \
		$GO test -count=1 -timeout 60m -run '^TestKernelsCompileWithoutSpills$' -v ./kernels/build >"$kcache/build.log" 2>&1 || {
		tail -30 "$kcache/build.log" >&2
		echo "build-bin.sh: the visit's kernels did not build (log: $kcache/build.log)" >&2
		exit 1
	}
	grep -E 'amk_megakernel .* registers' "$kcache/build.log" | sed 's/^ *//' >&2
	(cd "$kcache" && tar -cJf - v1/obj/*.cubin v1/obj/*.json) >bin/kernels-nvcc12.tar.xz
	echo "kernels: $(tar -tJf bin/kernels-nvcc12.tar.xz | grep -c cubin) cubins for sm_90a by nvcc $release, bin/kernels-nvcc12.tar.xz $(du -b bin/kernels-nvcc12.tar.xz | awk '{printf "%.1f MB", $1 / 1e6}')" >>bin/MANIFEST
fi
cat bin/MANIFEST
carried=$(($(du -sb bin | cut -f1) + $(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)))
echo "bin/ compressed: $(du -sh bin | cut -f1); with the working tree $((carried / 1048576)) MiB of the device tool's 64 MiB"
if [ "$carried" -gt $((60 * 1048576)) ]; then
	echo "build-bin.sh: bin/ and the working tree come to more than 60 MiB; a GPU visit could not carry them" >&2
	exit 1
fi
