#!/usr/bin/env bash
# debian-cuda.sh [--nvcc] [--ptxas12] [--print-dir]
#
# Fetches CUDA 11.8 from Debian bookworm's non-free component into a private
# directory, without installing anything and without touching /etc/apt:
#
#   headers (always):  $DIR/usr/include/cuda.h and the stub
#                      $DIR/usr/lib/x86_64-linux-gnu/stubs/libcuda.so, what the
#                      `cuda`-tagged Go build compiles and links against
#                      (gorgonia.org/cu does not compile against CUDA 13 headers)
#   --nvcc:            the whole device compiler, run through $DIR/bin/nvcc (a
#                      wrapper that sets the library path and the host compiler)
#   --ptxas12:         only ptxas, cuobjdump and nvdisasm of CUDA 12.4, from
#                      Debian trixie's nvidia-cuda-toolkit (87 MB), into
#                      $DIR/ptxas-12 (printed): what scripts/gpu/tma-check.sh
#                      assembles the TMA path with
#
# DIR is $AMK_CUDA_DEBIAN, default ${XDG_CACHE_HOME:-$HOME/.cache}/amk/cuda-11.8
# (where kernels' nvcc check and `make gpu-bin` look). Re-running is cheap: each
# part is fetched once. The packages are downloaded with apt-get into a
# temporary apt state (its own sources list naming the mirror of the system's
# Debian apt source, or $AMK_DEBIAN_MIRROR), so no root is needed. One .deb is
# large (nvidia-cuda-dev, 774 MB); only the few files needed are kept.
# --print-dir prints DIR and exits.
set -euo pipefail

want_nvcc=0
want_ptxas=0
for a in "$@"; do
	case "$a" in
	--nvcc) want_nvcc=1 ;;
	--ptxas12) want_ptxas=1 ;;
	--print-dir)
		echo "${AMK_CUDA_DEBIAN:-${XDG_CACHE_HOME:-$HOME/.cache}/amk/cuda-11.8}"
		exit 0
		;;
	-h | --help)
		sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "debian-cuda.sh: unknown argument $a (want --nvcc, --ptxas12, --print-dir)" >&2
		exit 2
		;;
	esac
done

DIR="${AMK_CUDA_DEBIAN:-${XDG_CACHE_HOME:-$HOME/.cache}/amk/cuda-11.8}"
mkdir -p "$DIR"
headers_done="$DIR/.headers-done"
nvcc_done="$DIR/.nvcc-done"
ptxas_dir="$DIR/ptxas-12"
if [ "$want_ptxas" = 1 ] && [ -x "$ptxas_dir/ptxas" ] && [ -x "$ptxas_dir/nvdisasm" ]; then
	echo "$ptxas_dir"
	exit 0
fi
if [ "$want_ptxas" = 0 ] && [ -f "$headers_done" ] && { [ "$want_nvcc" = 0 ] || [ -f "$nvcc_done" ]; }; then
	echo "$DIR"
	exit 0
fi

for tool in apt-get dpkg-deb tar; do
	command -v "$tool" >/dev/null || {
		echo "debian-cuda.sh: $tool not found (a Debian or Ubuntu host is needed)" >&2
		exit 2
	}
done

# The mirror: the URI of the system's Debian source (deb822 or one-line format).
mirror="${AMK_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
	mirror=$(
		{
			grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
			grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | sed 's/\[[^]]*\]//' | awk '{print $2}'
		} | grep -E '/debian/?$' | head -1 || true
	)
fi
if [ -z "$mirror" ]; then
	echo "debian-cuda.sh: no Debian mirror in the apt sources; set AMK_DEBIAN_MIRROR to the URI of a Debian archive" >&2
	exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/amk-debian-cuda.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/parts" "$work/debs"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
signed=""
[ -f "$keyring" ] && signed="[signed-by=$keyring] "
suite=bookworm
[ "$want_ptxas" = 1 ] && suite=trixie
cat >"$work/sources.list" <<EOF
deb ${signed}$mirror $suite main non-free
EOF
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts"
	-o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1 -qq)
# As root, apt downloads as the _apt user, which cannot write into $work.
[ "$(id -u)" = 0 ] && apt_opts+=(-o APT::Sandbox::User=root)
echo "debian-cuda.sh: reading the package index of $mirror ($suite main non-free)" >&2
apt-get "${apt_opts[@]}" update >&2

fetch() { (cd "$work/debs" && apt-get "${apt_opts[@]}" download "$@" >&2); }
deb() { ls "$work"/debs/"$1"_*.deb; }

if [ "$want_ptxas" = 1 ]; then
	echo "debian-cuda.sh: downloading nvidia-cuda-toolkit of trixie (CUDA 12.4: ptxas, cuobjdump, nvdisasm)" >&2
	fetch nvidia-cuda-toolkit
	mkdir -p "$work/x" "$ptxas_dir"
	dpkg-deb --fsys-tarfile "$(deb nvidia-cuda-toolkit)" | tar -x -C "$work/x" ./usr/bin/ptxas ./usr/bin/cuobjdump ./usr/bin/nvdisasm
	mv "$work/x/usr/bin/ptxas" "$work/x/usr/bin/cuobjdump" "$work/x/usr/bin/nvdisasm" "$ptxas_dir/"
	"$ptxas_dir/ptxas" --version >&2
	echo "$ptxas_dir"
	exit 0
fi

echo "debian-cuda.sh: downloading nvidia-cuda-dev (CUDA 11.8 headers and stubs, 774 MB)" >&2
fetch nvidia-cuda-dev
if [ ! -f "$headers_done" ]; then
	dpkg-deb --fsys-tarfile "$(deb nvidia-cuda-dev)" | tar -x -C "$DIR" ./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
	touch "$headers_done"
fi

if [ "$want_nvcc" = 1 ] && [ ! -f "$nvcc_done" ]; then
	echo "debian-cuda.sh: downloading nvidia-cuda-toolkit, libnvvm4, libcu++-dev (nvcc 11.8)" >&2
	fetch nvidia-cuda-toolkit libnvvm4 libcu++-dev
	# Every CUDA header (cuda_runtime.h, crt/, cooperative_groups/, ...), but none of the static libraries.
	dpkg-deb --fsys-tarfile "$(deb nvidia-cuda-dev)" | tar -x -C "$DIR" --wildcards './usr/include/*'
	dpkg-deb --fsys-tarfile "$(deb libcu++-dev)" | tar -x -C "$DIR" --wildcards './usr/include/*'
	dpkg-deb --fsys-tarfile "$(deb libnvvm4)" | tar -x -C "$DIR" --wildcards './usr/lib/x86_64-linux-gnu/libnvvm.so*'
	dpkg-deb --fsys-tarfile "$(deb nvidia-cuda-toolkit)" | tar -x -C "$DIR" \
		./usr/lib/nvidia-cuda-toolkit/bin/nvcc ./usr/lib/nvidia-cuda-toolkit/bin/cicc \
		./usr/lib/nvidia-cuda-toolkit/bin/crt ./usr/lib/nvidia-cuda-toolkit/libdevice \
		./usr/bin/ptxas ./usr/bin/fatbinary ./usr/bin/cudafe++ ./usr/bin/nvlink ./usr/bin/bin2c \
		./usr/bin/cuobjdump ./usr/bin/cu++filt
	tk="$DIR/usr/lib/nvidia-cuda-toolkit/bin"
	# The package's nvcc.profile is a link to /etc/nvcc.profile: write one that
	# points into $DIR (nvcc expands _HERE_ to its own directory).
	rm -f "$tk/nvcc.profile"
	cat >"$tk/nvcc.profile" <<'EOF'
NVVMIR_LIBRARY_DIR = $(_HERE_)/../libdevice
PATH += $(_HERE_):$(_HERE_)/../../../bin:
INCLUDES += "-I$(_HERE_)/../../../include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(_HERE_)/../../x86_64-linux-gnu/stubs"
EOF
	# The wrapper: nvcc 11.8 refuses g++ newer than 11 unless told to allow it,
	# and the Debian toolkit's own g++ wrapper looks for g++-11.
	mkdir -p "$DIR/bin"
	cat >"$DIR/bin/nvcc" <<'EOF'
#!/bin/sh
root=$(cd "$(dirname "$0")/.." && pwd)
LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	exec "$root/usr/lib/nvidia-cuda-toolkit/bin/nvcc" -ccbin "${AMK_NVCC_CCBIN:-g++}" -allow-unsupported-compiler "$@"
EOF
	chmod +x "$DIR/bin/nvcc"
	"$DIR/bin/nvcc" --version >&2
	touch "$nvcc_done"
fi
echo "$DIR"
