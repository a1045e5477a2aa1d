# lib.sh: the shared part of scripts/gpu/run-1.sh and run-2.sh (sourced,
# never run). A visit's script calls visit_start NAME BUDGET_S, then `step`
# for each measurement, then visit_end. Every step runs bounded (its own
# limit and the visit's deadline), logs to $R/<step>.log and records its exit
# code and wall time in $R/steps.tsv; a failing step never stops the visit,
# except compile_gate (the default kernel variant must build with the
# machine's nvcc, or nothing after it can run). visit_end packs $R into one
# archive, $OUT/NAME.tar.gz, and prints the step table last (the device tool
# returns the end of the output); it also runs on any early exit of the
# script (an EXIT trap), so the archive is written whatever happens.
# VISIT_BUDGET overrides a visit's budget in seconds (a dry run here).

# visit_start NAME BUDGET_S: results dir $R, deadline, environment.
visit_start() {
	VISIT=$1
	VISIT_T0=$(date +%s)
	VISIT_DEADLINE=$((VISIT_T0 + ${VISIT_BUDGET:-$2}))
	VISIT_PACKED=0
	trap visit_end EXIT
	OUT=${OUT:-${TMPDIR:-/tmp}/amk-gpu-out}
	mkdir -p "$OUT"
	R=$(mktemp -d "${TMPDIR:-/tmp}/amk-$VISIT.XXXXXX")/$VISIT
	mkdir -p "$R"
	printf 'step\trc\tseconds\tnote\n' >"$R/steps.tsv"
	export PYTHONUNBUFFERED=1
	# bin/ travels gzip-compressed (scripts/gpu/build-bin.sh): unpacked into
	# $BIN outside the tree (left in bin/, the unpacked copies would push a
	# later carry past the device tool's 64 MiB after a dry run here).
	export BIN=${BIN:-${TMPDIR:-/tmp}/amk-bin}
	mkdir -p "$BIN"
	for z in bin/*.gz; do
		[ -e "$z" ] || continue
		b="$BIN/$(basename "${z%.gz}")"
		[ "$b" -nt "$z" ] || { gzip -dc "$z" >"$b" && chmod +x "$b"; }
	done
	export PATH="$BIN:$PWD/bin:$PATH"
	# The build cache every test and verb of the visit shares (AMK_KERNEL_CACHE).
	export AMK_KERNEL_CACHE=${AMK_KERNEL_CACHE:-/tmp/amk-kernel-cache}
	mkdir -p "$AMK_KERNEL_CACHE"
	if [ -z "${AMK_NVCC:-}" ]; then
		AMK_NVCC=$(command -v nvcc || true)
		[ -z "$AMK_NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && AMK_NVCC=/usr/local/cuda/bin/nvcc
		export AMK_NVCC
	fi
	# libcuda.so.1: the binaries were linked against a stub; the driver's
	# library is not always on the loader's path (/usr/local/nvidia/lib64).
	if [ -x "$BIN/amkctl" ] && ldd "$BIN/amkctl" | grep -q 'libcuda.so.1 => not found'; then
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
	*) TARGET=${TARGET:-h100} ;;
	esac
	case "$GPU_CC" in
	9.0) ARCH=sm_90a ;;
	10.0) ARCH=sm_100a ;;
	"") ARCH=${ARCH:-sm_90} ;; # no GPU (a dry run): what Debian's nvcc 11.8 builds
	*) ARCH=sm_${GPU_CC/./} ;;
	esac
	export TARGET ARCH
	{
		echo "visit $VISIT, $(date -u +%FT%TZ), git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
		echo "gpu: $GPU_NAME (cc $GPU_CC) -> target $TARGET, arch $ARCH"
		echo "nvcc: $AMK_NVCC"
		echo "AMK_KERNEL_CACHE=$AMK_KERNEL_CACHE LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
		[ -f bin/MANIFEST ] && cat bin/MANIFEST
	} | tee "$R/visit.txt"
}

# remaining: seconds left before the deadline (less a reserve for packing).
remaining() { echo $((VISIT_DEADLINE - $(date +%s) - 15)); }

# step NAME LIMIT_S CMD...: run CMD bounded by min(LIMIT_S, remaining), in
# its own process group (timeout kills the group), output to $R/NAME.log.
step() {
	local name=$1 limit=$2
	shift 2
	local left
	left=$(remaining)
	[ "$left" -lt "$limit" ] && limit=$left
	if [ "$limit" -lt 5 ]; then
		printf '%s\t-\t0\tskipped: no time left\n' "$name" >>"$R/steps.tsv"
		echo "== $name: skipped (no time left)"
		return 0
	fi
	echo "== $name (limit ${limit}s): $*"
	local t0 rc
	t0=$(date +%s)
	timeout -k 10 "$limit" "$@" >"$R/$name.log" 2>&1
	rc=$?
	local note=""
	[ "$rc" = 124 ] || [ "$rc" = 137 ] && note="timed out after ${limit}s"
	printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" "$note" >>"$R/steps.tsv"
	tail -n 3 "$R/$name.log" | sed 's/^/   /'
	return 0
}

# compile_gate: build the default kernel variant alone with the machine's nvcc
# (about a minute) before any step that needs kernels. If it does not build (a
# C++ or PTX error of this nvcc, no usable nvcc), every later step would
# rebuild it and fail in turn for the rest of the budget: the visit ends here
# instead, the compiler's errors in summary.txt, printed last. A register
# spill alone fails the test but not the gate (the kernels still run).
compile_gate() {
	step compile 150 env AMK_NVCC_ARCH="$ARCH" AMK_KERNEL_VARIANTS=default \
		build.test -test.run TestKernelsCompileWithoutSpills -test.v -test.timeout 145s
	if grep -q -- '--- PASS: TestKernelsCompileWithoutSpills' "$R/compile.log" ||
		{ grep -q 'spills registers' "$R/compile.log" && ! grep -qE 'C\+\+ error|not a cubin|lacks kernel' "$R/compile.log"; }; then
		return 0
	fi
	{
		echo "STOPPED: the default kernel variant does not build with ${AMK_NVCC:-no nvcc} for $ARCH (compile.log):"
		grep -E 'error|warning|FAIL|SKIP|does not run|panic|timed out' "$R/compile.log" | head -40
	} >"$R/summary.txt"
	exit 1
}

# visit_end: one archive under $OUT and the step table (once).
visit_end() {
	[ "${VISIT_PACKED:-0}" = 1 ] && return 0
	VISIT_PACKED=1
	echo "total $(($(date +%s) - VISIT_T0)) s" >>"$R/visit.txt"
	tar -czf "$OUT/$VISIT.tar.gz" -C "$(dirname "$R")" "$VISIT"
	echo
	echo "archive: $OUT/$VISIT.tar.gz ($(du -h "$OUT/$VISIT.tar.gz" | cut -f1))"
	column -t -s $'\t' "$R/steps.tsv" 2>/dev/null || cat "$R/steps.tsv"
	[ -f "$R/summary.txt" ] && cat "$R/summary.txt"
	return 0
}
