/* ringplan_host.cu: the streaming weight ring's plan (kernels/cuda/ring.cuh), run on the host
 * over the tables the Go marshaller uploads for a real program (TestRingPlanOnTheHost in
 * ringplan_test.go builds and runs it). Compiled by nvcc with the variant's -D knobs; the
 * device functions it calls are the __host__ __device__ ones the megakernel calls.
 *
 *   ringplan_host DIR DYN_SMEM RING_BYTES N_BUFFERS N_INSTRUCTIONS NUM_QUEUES
 *
 * DIR holds buffers.bin, instructions.bin, queue_flat.bin, queue_off.bin, queue_len.bin (the
 * kernels.Tables bytes, pointers bound to fake device addresses). It prints
 *   ring_bytes B active 0|1 ops_smem S
 *   task ID ring 0|1 chunks C rows R prefetch P  (once per queue slot; C summed over the warps)
 * and one "FAIL: ..." line per broken invariant, exiting 1 if there is any:
 *   - amk_ring_bytes() is RING_BYTES (kernels.RingBytes);
 *   - the ring lies inside the dynamic shared memory, 16-byte aligned, above the ops' share;
 *   - for every ring task and warp, the chunks the issuer derives (amk_ring_chunk_src_for,
 *     j = 0 .. total-1) are exactly the ones the consumer reads in its own loop order (x row m,
 *     row range: one, or a paired tile's two in amk_op_fused's order, weight row
 *     t = warp + r * warps of the range, chunk ci: amk_gemv_fp / amk_op_fused ->
 *     amk_gemv_ring_row), each a 16-byte aligned run of AMK_RING_TILE_BYTES inside the weight
 *     buffer;
 *   - the warps' rows cover the tile's N_tile rows once;
 *   - the weight rows the issuer's chunks read, all warps together, are exactly the tile's
 *     rows (ir.TileRanges: [n_off, n_off + N_tile), or a paired tile's [n_off, n_off + w) and
 *     [n_off + head_dim/2, n_off + head_dim/2 + w), w = N_tile/2: no row between or beyond
 *     them, the neighbour tiles' rows), each chunk of each row once per x row.
 * A ring task's line ends with the weight rows its chunks read (R) and the rows the megakernel's
 * L2 prefetch covers for it (P, amk_tile_weight_bytes), each as "A-B[,C-D]" (half-open runs; "-"
 * off the ring), which the Go side compares with ir.TileRanges. */
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops_gemv.cuh"

/* Linked with --cudart none (the harness launches nothing, and Debian's toolkit has no static
 * runtime): the module registration nvcc emits for the headers' device code gets no-op stubs. */
extern "C" void** __cudaRegisterFatBinary(void*) {
    static void* handle = nullptr;
    return &handle;
}
extern "C" void __cudaRegisterFatBinaryEnd(void**) {}
extern "C" void __cudaUnregisterFatBinary(void**) {}

static int failures = 0;

#define FAIL(...)                      \
    do {                               \
        std::printf("FAIL: ");         \
        std::printf(__VA_ARGS__);      \
        std::printf("\n");             \
        ++failures;                    \
    } while (0)

template <typename T>
static std::vector<T> load(const std::string& path, long want) {
    std::vector<T> out;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        std::printf("FAIL: cannot open %s\n", path.c_str());
        std::exit(2);
    }
    T rec;
    while (std::fread(&rec, sizeof(T), 1, f) == 1) out.push_back(rec);
    std::fclose(f);
    if (want >= 0 && (long)out.size() != want) {
        std::printf("FAIL: %s holds %zu records, want %ld\n", path.c_str(), out.size(), want);
        std::exit(2);
    }
    return out;
}

/* Bits of one weight element: the float dtypes, int8, packed int4. */
static int64_t elem_bits(int32_t dt) {
    return dt == AMK_F32 ? 32 : dt == AMK_I8 ? 8 : dt == AMK_I4 ? 4 : 16;
}

/* The tile's weight row ranges (ir.TileRanges): one, or a paired tile's two. Returns the count. */
static int tile_ranges(const amk_instruction_t& inst, int64_t lo[2], int64_t hi[2]) {
    const int N_tile = inst.params.N_tile, n_off = inst.params.n_off;
    if (inst.op == AMK_OP_FUSED && (inst.params.flags & AMK_FLAG_PAIRED_TILE)) {
        const int w = N_tile / 2, stride = inst.params.head_dim / 2;
        lo[0] = n_off, hi[0] = n_off + w;
        lo[1] = n_off + stride, hi[1] = n_off + stride + w;
        return 2;
    }
    lo[0] = n_off, hi[0] = n_off + N_tile;
    return 1;
}

/* What the issuer's chunks of one task read, all warps together: per weight row and chunk of the
 * row, how often (row - base, chunk). */
struct row_reads {
    int64_t base = 0;
    int nchunks = 0;
    std::vector<long> count; /* (row - base) * nchunks + chunk */
};

/* The consumer's walk of one task for one warp, against the issuer's chunk sources; every chunk
 * the issuer copies is also counted in `reads`. */
static long check_task(const std::vector<amk_buffer_t>& bufs, const amk_instruction_t& inst, int task, int warp,
                       const amk_ring_plan& plan, row_reads* reads) {
    int wi = 1;
    if (inst.op == AMK_OP_FUSED) {
        const int32_t pat = (inst.params.flags >> AMK_FUSED_PATTERN_SHIFT) & 0xFFFF;
        wi = (amk_fused_pattern_shape(pat).staging == 0 || pat == AMK_FUSED_GEMV_ADD) ? 1 : 2;
    }
    const amk_buffer_t& W = bufs[inst.inputs[wi]];
    const amk_buffer_t& x = bufs[inst.inputs[0]];
    const int K = inst.params.K;
    const int64_t bits = elem_bits(W.dtype); /* int8 and packed int4 weights stream their stored bytes */
    const int64_t ldw = W.rank >= 2 ? W.stride[0] : K, ldb = ldw * bits / 8;
    const int nchunks = (int)(((int64_t)K * bits / 8) / AMK_RING_TILE_BYTES);
    const char* lo = (const char*)W.ptr;
    const char* hi = lo + (W.numel * bits + 7) / 8;
    const int64_t M = x.numel / K;
    /* amk_op_fused's walk: per x row, range r = 0 (and 1 for a paired tile) of w rows from
     * n_off + r * head_dim/2, through amk_gemv_fp_row -> amk_gemv_ring_row (rows t = warp, warp +
     * warps, ...); amk_gemv_fp's is the one range of N_tile rows from n_off. */
    const bool paired = inst.op == AMK_OP_FUSED && (inst.params.flags & AMK_FLAG_PAIRED_TILE);
    const int nr = paired ? 2 : 1, w = paired ? inst.params.N_tile / 2 : inst.params.N_tile;
    const int stride = paired ? inst.params.head_dim / 2 : 0;
    int32_t j = 0;
    for (int64_t m = 0; m < M; ++m)
        for (int r = 0; r < nr; ++r)
            for (int t = warp; t < w; t += AMK_WARPS)
                for (int ci = 0; ci < nchunks; ++ci, ++j) {
                    const int64_t n = (int64_t)inst.params.n_off + r * stride + t;
                    const char* want = lo + n * ldb + (int64_t)ci * AMK_RING_TILE_BYTES;
                    if (j >= plan.total) continue;
                    const char* got = amk_ring_chunk_src_for(plan, j, warp);
                    if (got != want)
                        FAIL("task %d warp %d chunk %d: the issuer copies offset %lld, the consumer reads %lld", task,
                             warp, j, (long long)(got - lo), (long long)(want - lo));
                    if (((uintptr_t)got & 15) != 0 || got < lo || got + AMK_RING_TILE_BYTES > hi) {
                        FAIL("task %d warp %d chunk %d: source offset %lld is misaligned or outside the %lld-byte weight",
                             task, warp, j, (long long)(got - lo), (long long)(hi - lo));
                        continue;
                    }
                    const int64_t row = (got - lo) / ldb, byte = (got - lo) % ldb;
                    const int64_t cell = (row - reads->base) * reads->nchunks + byte / AMK_RING_TILE_BYTES;
                    if (byte % AMK_RING_TILE_BYTES != 0 || row < reads->base || cell >= (int64_t)reads->count.size())
                        FAIL("task %d warp %d chunk %d: reads weight row %lld at byte %lld, outside the tile's rows [%lld, %lld)",
                             task, warp, j, (long long)row, (long long)byte, (long long)reads->base,
                             (long long)(reads->base + (int64_t)reads->count.size() / reads->nchunks));
                    else
                        ++reads->count[cell];
                }
    if (j != plan.total)
        FAIL("task %d warp %d: the issuer streams %d chunks, the consumer reads %d", task, warp, plan.total, j);
    return plan.rows;
}

/* The rows the issuer read for one task, against the tile's ranges: each chunk of each tile row
 * read M times, no other row read; returns the rows read as "A-B[,C-D...]" (half-open runs). */
static std::string check_rows(const std::vector<amk_buffer_t>& bufs, const amk_instruction_t& inst, int task,
                              const row_reads& reads) {
    const int64_t M = bufs[inst.inputs[0]].numel / inst.params.K;
    int64_t rlo[2], rhi[2];
    const int nr = tile_ranges(inst, rlo, rhi);
    std::string out;
    int64_t run = -1;
    const int64_t nrows = (int64_t)reads.count.size() / reads.nchunks;
    for (int64_t i = 0; i <= nrows; ++i) {
        const int64_t row = reads.base + i;
        bool in_tile = false;
        for (int r = 0; r < nr; ++r) in_tile = in_tile || (row >= rlo[r] && row < rhi[r]);
        bool read = false;
        for (int c = 0; i < nrows && c < reads.nchunks; ++c) {
            const long n = reads.count[i * reads.nchunks + c];
            read = read || n > 0;
            if (n != (in_tile ? M : 0))
                FAIL("task %d: weight row %lld chunk %d read %ld times, want %lld (%s)", task, (long long)row, c, n,
                     (long long)(in_tile ? M : 0), in_tile ? "a row of the tile" : "not a row of the tile");
        }
        if (read && run < 0) run = row;
        if (!read && run >= 0) {
            out += (out.empty() ? "" : ",") + std::to_string(run) + "-" + std::to_string(row);
            run = -1;
        }
    }
    return out.empty() ? "-" : out;
}

/* The weight rows the megakernel's L2 prefetch covers for one task (amk_weight_range's call of
 * amk_tile_weight_bytes, with its row size: numel / shape[0] elements), as "A-B[,C-D]"; each range
 * must be whole rows. */
static std::string prefetch_rows(const std::vector<amk_buffer_t>& bufs, const amk_instruction_t& inst, int task) {
    int wi = 1;
    bool paired = false;
    if (inst.op == AMK_OP_FUSED) {
        const amk_fused_shape f = amk_fused_pattern_shape((inst.params.flags >> AMK_FUSED_PATTERN_SHIFT) & 0xFFFF);
        wi = f.staging == 0 ? 1 : 2;
        paired = (inst.params.flags & AMK_FLAG_PAIRED_TILE) != 0;
    }
    const amk_buffer_t& W = bufs[inst.inputs[wi]];
    const int64_t bits = elem_bits(W.dtype), row_bytes = (W.numel / W.shape[0]) * bits / 8;
    int64_t begin, end, second;
    if (!amk_tile_weight_bytes(paired, inst.params.n_off, inst.params.N_tile, paired ? inst.params.head_dim : 0,
                               row_bytes * 8, W.numel * bits / 8, &begin, &end, &second))
        return "-";
    if (begin % row_bytes || end % row_bytes || second % row_bytes)
        FAIL("task %d: the prefetch covers bytes [%lld, %lld) + %lld, not whole %lld-byte rows", task, (long long)begin,
             (long long)end, (long long)second, (long long)row_bytes);
    std::string out = std::to_string(begin / row_bytes) + "-" + std::to_string(end / row_bytes);
    if (second > 0)
        out += "," + std::to_string((begin + second) / row_bytes) + "-" + std::to_string((end + second) / row_bytes);
    return out;
}

int main(int argc, char** argv) {
    if (argc != 7) {
        std::printf("usage: %s DIR DYN_SMEM RING_BYTES N_BUFFERS N_INSTRUCTIONS NUM_QUEUES\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const uint32_t dyn = (uint32_t)std::strtoul(argv[2], nullptr, 10);
    const uint32_t ring_go = (uint32_t)std::strtoul(argv[3], nullptr, 10);
    const auto bufs = load<amk_buffer_t>(dir + "/buffers.bin", std::atol(argv[4]));
    const auto insts = load<amk_instruction_t>(dir + "/instructions.bin", std::atol(argv[5]));
    const auto qoff = load<int32_t>(dir + "/queue_off.bin", std::atol(argv[6]));
    const auto qlen = load<int32_t>(dir + "/queue_len.bin", std::atol(argv[6]));
    const auto qflat = load<int32_t>(dir + "/queue_flat.bin", -1);

    if (amk_ring_bytes() != ring_go) FAIL("amk_ring_bytes() = %u, kernels.RingBytes = %u", amk_ring_bytes(), ring_go);
    const bool active = amk_ring_fits(dyn);
    const uint32_t ops = active ? amk_ring_offset(dyn) : dyn;
    std::printf("ring_bytes %u active %d ops_smem %u\n", amk_ring_bytes(), active ? 1 : 0, ops);
    if (active && ((ops & 15u) != 0 || ops + amk_ring_bytes() > dyn || ops < 16u))
        FAIL("ring at offset %u + %u bytes does not fit %u bytes of dynamic shared memory", ops, amk_ring_bytes(), dyn);

    for (size_t q = 0; q < qoff.size(); ++q) {
        for (int32_t s = 0; s < qlen[q]; ++s) {
            const int32_t task = qflat[qoff[q] + s];
            if (task < 0 || task >= (int32_t)insts.size()) {
                FAIL("queue %zu slot %d: task %d out of range", q, s, task);
                continue;
            }
            const amk_instruction_t& inst = insts[task];
            long chunks = 0, rows = 0;
            bool ring = false;
            row_reads reads;
            for (int w = 0; w < AMK_WARPS && active; ++w) {
                amk_ring_plan plan;
                const bool on = amk_ring_plan_for(bufs.data(), (int32_t)bufs.size(), inst, ops, w, &plan);
                if (w > 0 && on != ring) FAIL("task %d: warp %d disagrees with warp 0 on riding the ring", task, w);
                ring = ring || on;
                if (!on) continue;
                if (reads.count.empty()) { /* the rows from the tile's first to its last (a read outside: FAIL) */
                    int64_t rlo[2], rhi[2];
                    const int nr = tile_ranges(inst, rlo, rhi);
                    reads.base = rlo[0];
                    reads.nchunks = plan.nchunks;
                    reads.count.assign((size_t)(rhi[nr - 1] - rlo[0]) * plan.nchunks, 0);
                }
                rows += check_task(bufs, inst, task, w, plan, &reads);
                chunks += plan.total;
            }
            if (ring && rows != inst.params.N_tile)
                FAIL("task %d: the warps stream %ld weight rows, the tile has %d", task, rows, inst.params.N_tile);
            std::printf("task %d ring %d chunks %ld rows %s prefetch %s\n", task, ring ? 1 : 0, chunks,
                        ring && reads.nchunks > 0 ? check_rows(bufs, inst, task, reads).c_str() : "-",
                        ring ? prefetch_rows(bufs, inst, task).c_str() : "-");
        }
    }
    return failures ? 1 : 0;
}
