# lib.sh: the step machinery of scripts/gpu/visit.sh (sourced, never run).
#
# visit_start NAME BUDGET_S sets up the results folder $R, the deadline
# (BUDGET_S from now) and the environment; then
#   step NAME LIMIT_S CMD...     runs CMD in the foreground,
#   bg_step NAME LIMIT_S CMD...  runs it in the background (bg_wait waits),
#   skip NAME REASON             records a step that does not run here,
# and visit_end packs and prints. Every step is bounded by min(LIMIT_S, what
# is left before the deadline) through timeout(1), runs in a session of its
# own (setsid) that is killed whole when it ends, so that no compiler or
# child outlives its step; it logs to $R/NAME.log and adds a line (exit code,
# seconds, note) to $R/steps.tsv. A failing step never stops the visit.
# After every step the results are packed again into $OUT/NAME.tar.gz (a
# temporary file renamed over the last), so that a visit killed at the
# device tool's limit still returns everything done so far.
#
# $GPU_LOCK is the GPU lock: a step that times the GPU runs its command as
# `flock -w 120 $GPU_LOCK CMD...`, so that a background baseline never times
# concurrently with a foreground measurement.

# visit_start NAME BUDGET_S
visit_start() {
	VISIT=$1
	VISIT_T0=$(date +%s)
	VISIT_DEADLINE=$((VISIT_T0 + $2))
	VISIT_PACKED=0
	BG_PIDS=()
	trap visit_end EXIT
	OUT=${OUT:-${TMPDIR:-/tmp}/amk-gpu-out}
	mkdir -p "$OUT"
	R=$(mktemp -d "${TMPDIR:-/tmp}/amk-$VISIT.XXXXXX")/$VISIT
	mkdir -p "$R"
	printf 'step\trc\tseconds\tstart_s\tnote\n' >"$R/steps.tsv"
	GPU_LOCK=$(dirname "$R")/gpu.lock
	export R OUT VISIT GPU_LOCK
	export PYTHONUNBUFFERED=1
	HAVE_SETSID=0
	command -v setsid >/dev/null && command -v pkill >/dev/null && HAVE_SETSID=1
	# bin/ travels gzip-compressed (scripts/gpu/build-bin.sh): unpacked into
	# $BIN outside the tree (left in bin/, the unpacked copies would push a
	# later carry past the device tool's 64 MiB after a dry run here).
	# On the emulator (a rehearsal) the binaries are plain builds in $BIN: the
	# cuda ones do not start without libcuda.so.1.
	export BIN=${BIN:-${TMPDIR:-/tmp}/amk-bin}
	mkdir -p "$BIN"
	[ "${DEVICE:-cuda}" = emu ] || for z in bin/*.gz; do
		[ -e "$z" ] || continue
		b="$BIN/$(basename "${z%.gz}")"
		[ "$b" -nt "$z" ] || { gzip -dc "$z" >"$b" && chmod +x "$b"; }
	done
	export PATH="$BIN:$PWD/bin:$PATH"
	# The build cache every step shares, and the kernels built elsewhere
	# (bin/kernels-*.tar.*: the cubins `make gpu-bin` compiled with nvcc 12.4,
	# and those an earlier call built on the device), which the build takes
	# before compiling (AMK_KERNEL_PREBUILT, kernels/build).
	export AMK_KERNEL_CACHE=${AMK_KERNEL_CACHE:-/tmp/amk-kernel-cache}
	export AMK_KERNEL_PREBUILT=${AMK_KERNEL_PREBUILT:-/tmp/amk-kernel-prebuilt}
	mkdir -p "$AMK_KERNEL_CACHE" "$AMK_KERNEL_PREBUILT"
	for k in bin/kernels-*.tar.*; do
		[ -e "$k" ] || continue
		tar -xf "$k" -C "$AMK_KERNEL_PREBUILT" || echo "could not unpack $k" >&2
	done
	# The kernel sources of this tree, not only the ones embedded in the
	# binaries: a CUDA fix made after `make gpu-bin` travels with the tree.
	export AMK_KERNEL_SOURCES=${AMK_KERNEL_SOURCES:-$PWD/kernels}
	if [ -z "${AMK_NVCC:-}" ]; then
		AMK_NVCC=$(command -v nvcc || true)
		[ -z "$AMK_NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && AMK_NVCC=/usr/local/cuda/bin/nvcc
		export AMK_NVCC
	fi
	# libcuda.so.1: the binaries were linked against a stub; the driver's
	# library is not always on the loader's path (/usr/local/nvidia/lib64).
	if [ -x "$BIN/amkctl" ] && ldd "$BIN/amkctl" 2>/dev/null | grep -q 'libcuda.so.1 => not found'; then
		for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/local/cuda/compat /usr/lib64; do
			if [ -e "$d/libcuda.so.1" ]; then
				export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
				break
			fi
		done
	fi
	GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
	GPU_CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
	case "$GPU_NAME" in
	*H200*) TARGET=h200 ;;
	*H100*) TARGET=h100 ;;
	*) TARGET=${TARGET:-h200} ;;
	esac
	case "$GPU_CC" in
	9.0) ARCH=sm_90a ;;
	10.0) ARCH=sm_100a ;;
	"") ARCH=${ARCH:-sm_90a} ;;
	*) ARCH=sm_${GPU_CC/./} ;;
	esac
	export TARGET ARCH
	{
		echo "visit $VISIT, $(date -u +%FT%TZ), git $(git rev-parse --short HEAD 2>/dev/null || echo '?'), deadline $2 s"
		echo "gpu: ${GPU_NAME:-none} (cc ${GPU_CC:-?}) -> target $TARGET, arch $ARCH, device ${DEVICE:-cuda}"
		echo "nvcc: ${AMK_NVCC:-none}"
		echo "AMK_KERNEL_CACHE=$AMK_KERNEL_CACHE AMK_KERNEL_PREBUILT=$AMK_KERNEL_PREBUILT ($(find "$AMK_KERNEL_PREBUILT" -name '*.cubin' | wc -l) cubins)"
		echo "AMK_KERNEL_SOURCES=$AMK_KERNEL_SOURCES LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
		[ -f bin/MANIFEST ] && cat bin/MANIFEST
	} | tee "$R/visit.txt"
}

# left: seconds before the deadline, less a reserve for the last packing.
left() { echo $((VISIT_DEADLINE - $(date +%s) - 10)); }

# pack: the results (and the kernels this visit built, kernels-device.tar.*)
# into $OUT, each through a temporary file and a rename; serialised.
pack() {
	(
		flock -w 20 9 || exit 0
		tar -czf "$OUT/.$VISIT.tar.gz" -C "$(dirname "$R")" "$VISIT" 2>/dev/null &&
			mv -f "$OUT/.$VISIT.tar.gz" "$OUT/$VISIT.tar.gz"
	) 9>"$(dirname "$R")/pack.lock"
}

# record NAME RC SECONDS START NOTE
record() {
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$R/steps.tsv"
}

# skip NAME REASON: a step that does not run in this visit.
skip() {
	record "$1" - 0 $(($(date +%s) - VISIT_T0)) "skipped: $2"
	echo "== $1: skipped: $2"
}

# step NAME LIMIT_S CMD...
step() {
	local name=$1 limit=$2
	shift 2
	local l
	l=$(left)
	[ "$l" -lt "$limit" ] && limit=$l
	if [ "$limit" -lt 5 ]; then
		skip "$name" "no time left"
		pack
		return 0
	fi
	echo "== $name (limit ${limit}s, at $(($(date +%s) - VISIT_T0))s): $*"
	local t0 rc pid
	t0=$(date +%s)
	if [ "$HAVE_SETSID" = 1 ]; then
		# A background child of a script is not a group leader, so setsid
		# makes it the leader of a new session without forking: $! is the
		# session id, and pkill -s ends whatever is left in it (nvcc runs
		# in process groups of its own inside the session).
		setsid timeout -k 5 "$limit" "$@" >"$R/$name.log" 2>&1 </dev/null &
		pid=$!
		wait "$pid"
		rc=$?
		pkill -KILL -s "$pid" 2>/dev/null
	else
		timeout -k 5 "$limit" "$@" >"$R/$name.log" 2>&1 </dev/null
		rc=$?
	fi
	local note=""
	{ [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && note="timed out after ${limit}s"
	record "$name" "$rc" $(($(date +%s) - t0)) $((t0 - VISIT_T0)) "$note"
	tail -n 2 "$R/$name.log" | cut -c1-200 | sed 's/^/   /'
	pack
	return 0
}

# bg_step NAME LIMIT_S CMD...: step in the background; bg_wait collects it.
bg_step() {
	step "$@" >>"$R/background.txt" 2>&1 &
	BG_PIDS+=($!)
}

# bg_wait: wait for the background steps until the deadline; each is bounded
# by its own limit already, this only stops the visit from waiting past it.
bg_wait() {
	local pid
	for pid in "${BG_PIDS[@]}"; do
		while kill -0 "$pid" 2>/dev/null && [ "$(left)" -gt 0 ]; do sleep 1; done
	done
	BG_PIDS=()
}


# visit_end: the summary ($VISIT_SUMMARY, a command bounded to 15 s, into
# $R/summary.txt), the last packing and the step table (once; also on an
# early exit of the script).
visit_end() {
	[ "${VISIT_PACKED:-0}" = 1 ] && return 0
	VISIT_PACKED=1
	[ -n "${VISIT_SUMMARY:-}" ] && timeout -k 2 15 bash -c "$VISIT_SUMMARY" >"$R/summary.txt" 2>&1
	echo "total $(($(date +%s) - VISIT_T0)) s" >>"$R/visit.txt"
	pack
	echo
	echo "archive: $OUT/$VISIT.tar.gz ($(du -h "$OUT/$VISIT.tar.gz" 2>/dev/null | cut -f1))"
	ls -l "$OUT" | tail -n +2
	column -t -s $'\t' "$R/steps.tsv" 2>/dev/null || cat "$R/steps.tsv"
	[ -f "$R/summary.txt" ] && cat "$R/summary.txt"
	return 0
}
