#!/usr/bin/env bash
# debian-cuda.sh [--release 11.8|12.4] [--dir DIR] [--nvcc] [--ptxas12] [--print-dir]
#
# Fetches a CUDA toolkit from Debian's non-free component into a private
# directory, without installing anything and without touching /etc/apt.
# --release picks it: 11.8 (the default) from bookworm, 12.4 from trixie.
#
#   headers (always):  $DIR/usr/include/cuda.h and the stub
#                      $DIR/usr/lib/x86_64-linux-gnu/stubs/libcuda.so, what the
#                      `cuda`-tagged Go build compiles and links against
#                      (gorgonia.org/cu does not compile against CUDA 13 headers)
#   --nvcc:            the whole device compiler, run through $DIR/bin/nvcc (a
#                      wrapper that sets the library path and the host compiler).
#                      nvcc 12.4 compiles sm_90a, the streaming ring's TMA path
#                      included; nvcc 11.8 compiles sm_90 only, without that path
#   --ptxas12:         (11.8 only) ptxas, cuobjdump and nvdisasm of CUDA 12.4
#                      from trixie (87 MB) into $DIR/ptxas-12 (printed): what
#                      scripts/gpu/tma-check.sh assembles the TMA path with
#
# DIR is --dir, else $AMK_CUDA_DEBIAN, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/amk/cuda-RELEASE (where `make gpu-bin` looks).
# `make test` installs the 12.4 compiler into the checkout's own .cache/cuda-12.4
# (scripts/ensure-deps.sh), which is where the kernel tests and `amkctl doctor`
# look. Re-running is cheap: each part is fetched once, and a part is marked done
# only once it is complete, so an interrupted fetch is redone. The packages are
# downloaded with apt-get into a temporary apt state (its own sources list naming
# the mirror of the system's Debian apt source, or $AMK_DEBIAN_MIRROR), so no root
# is needed. One .deb is large (nvidia-cuda-dev: 774 MB for 11.8, 934 MB for
# 12.4); only the few files needed are kept (about 230 MB with --nvcc).
# --print-dir prints DIR and exits. The last line printed is DIR (or the ptxas
# directory); progress goes to stderr.
set -euo pipefail

release=11.8
dir_arg=""
want_nvcc=0
want_ptxas=0
print_dir=0
while [ $# -gt 0 ]; do
	case "$1" in
	--nvcc) want_nvcc=1 ;;
	--ptxas12) want_ptxas=1 ;;
	--print-dir) print_dir=1 ;;
	--release | --dir)
		[ $# -ge 2 ] || {
			echo "debian-cuda.sh: $1 needs a value" >&2
			exit 2
		}
		if [ "$1" = --release ]; then release=$2; else dir_arg=$2; fi
		shift
		;;
	-h | --help)
		sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "debian-cuda.sh: unknown argument $1 (want --release 11.8|12.4, --dir DIR, --nvcc, --ptxas12, --print-dir)" >&2
		exit 2
		;;
	esac
	shift
done
case "$release" in
11.8) suite=bookworm ;;
12.4) suite=trixie ;;
*)
	echo "debian-cuda.sh: --release $release: want 11.8 (Debian bookworm) or 12.4 (Debian trixie)" >&2
	exit 2
	;;
esac
if [ "$want_ptxas" = 1 ] && [ "$release" != 11.8 ]; then
	echo "debian-cuda.sh: --ptxas12 completes an 11.8 toolkit; with --release 12.4 use --nvcc (ptxas is in DIR/usr/bin)" >&2
	exit 2
fi

DIR="${dir_arg:-${AMK_CUDA_DEBIAN:-${XDG_CACHE_HOME:-$HOME/.cache}/amk/cuda-$release}}"
if [ "$print_dir" = 1 ]; then
	echo "$DIR"
	exit 0
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
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

# One fetch at a time per directory (two `make test` in one checkout).
if command -v flock >/dev/null; then
	exec 9>"$DIR/.lock"
	flock 9
fi

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
index_suite=$suite
[ "$want_ptxas" = 1 ] && index_suite=trixie
cat >"$work/sources.list" <<EOF
deb ${signed}$mirror $index_suite main non-free
EOF
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts"
	-o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1 -qq)
# As root, apt downloads as the _apt user, which cannot write into $work.
[ "$(id -u)" = 0 ] && apt_opts+=(-o APT::Sandbox::User=root)
echo "debian-cuda.sh: reading the package index of $mirror ($index_suite main non-free)" >&2
apt-get "${apt_opts[@]}" update >&2

# apt-get download checks every .deb against the signed index.
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

dev_size=774
[ "$release" = 12.4 ] && dev_size=934
if [ "$want_nvcc" = 0 ] || [ -f "$nvcc_done" ]; then
	echo "debian-cuda.sh: downloading nvidia-cuda-dev (CUDA $release headers and stubs, $dev_size MB)" >&2
	fetch nvidia-cuda-dev
	dpkg-deb --fsys-tarfile "$(deb nvidia-cuda-dev)" | tar -x -C "$DIR" ./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
	touch "$headers_done"
else
	echo "debian-cuda.sh: downloading nvidia-cuda-dev ($dev_size MB), nvidia-cuda-toolkit, libnvvm4, libcu++-dev (CUDA $release)" >&2
	fetch nvidia-cuda-dev nvidia-cuda-toolkit libnvvm4 libcu++-dev
	echo "debian-cuda.sh: unpacking nvcc $release into $DIR" >&2
	# Every CUDA header (cuda_runtime.h, crt/, cooperative_groups/, ...) and
	# the stub libcuda.so, but none of the static libraries; one pass over
	# the large package.
	dpkg-deb --fsys-tarfile "$(deb nvidia-cuda-dev)" | tar -x -C "$DIR" --wildcards './usr/include/*' ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
	touch "$headers_done"
	dpkg-deb --fsys-tarfile "$(deb libcu++-dev)" | tar -x -C "$DIR" --wildcards './usr/include/*'
	dpkg-deb --fsys-tarfile "$(deb libnvvm4)" | tar -x -C "$DIR" --wildcards './usr/lib/x86_64-linux-gnu/libnvvm.so*'
	tools=(./usr/lib/nvidia-cuda-toolkit/bin/nvcc ./usr/lib/nvidia-cuda-toolkit/bin/cicc
		./usr/lib/nvidia-cuda-toolkit/bin/crt ./usr/lib/nvidia-cuda-toolkit/libdevice
		./usr/bin/ptxas ./usr/bin/fatbinary ./usr/bin/cudafe++ ./usr/bin/nvlink ./usr/bin/bin2c
		./usr/bin/cuobjdump ./usr/bin/cu++filt)
	# cuobjdump -sass needs nvdisasm (12.4 ships it in the toolkit package).
	[ "$release" = 12.4 ] && tools+=(./usr/bin/nvdisasm)
	dpkg-deb --fsys-tarfile "$(deb nvidia-cuda-toolkit)" | tar -x -C "$DIR" "${tools[@]}"
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
	# The wrapper: the toolkit's own g++ wrapper looks for the newest g++ its
	# nvcc supports (g++-11 for 11.8), and nvcc refuses a newer host compiler
	# unless told to allow it (11.8 refuses Debian bookworm's g++ 12).
	# Written under a temporary name and moved into place once it answers with
	# the right release: a bin/nvcc that exists is a complete toolkit.
	mkdir -p "$DIR/bin"
	cat >"$DIR/bin/.nvcc.tmp" <<'EOF'
#!/bin/sh
root=$(cd "$(dirname "$0")/.." && pwd)
LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	exec "$root/usr/lib/nvidia-cuda-toolkit/bin/nvcc" -ccbin "${AMK_NVCC_CCBIN:-g++}" -allow-unsupported-compiler "$@"
EOF
	chmod +x "$DIR/bin/.nvcc.tmp"
	version=$("$DIR/bin/.nvcc.tmp" --version)
	echo "$version" >&2
	case "$version" in
	*"release $release,"*) ;;
	*)
		echo "debian-cuda.sh: the unpacked nvcc is not release $release" >&2
		exit 1
		;;
	esac
	mv "$DIR/bin/.nvcc.tmp" "$DIR/bin/nvcc"
	touch "$nvcc_done"
fi
echo "$DIR"
