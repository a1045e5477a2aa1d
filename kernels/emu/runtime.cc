/* ==========================================================================================
 * amk's CPU emulator of the megakernel: the runtime (fibers, block schedulers, barriers, warp
 * collectives, cp.async and the bulk-copy engine with its mbarriers, the launch, the reports) and
 * the emulator's command line. emu.h describes the model; the kernel translation unit
 * (kernel.cc, compiled per knob variant) provides amk_emu_megakernel.
 *
 *   amk-emu --image FILE --base ADDR --program ADDR --grid G --threads T --smem BYTES
 *           [--counters ADDR --counters-n N] [--seed S] [--timeout-s SECONDS] [--report FILE]
 *
 * FILE is an image of device memory laid out by the caller (kernels/launch: the emulator
 * device) for the address BASE: the runtime maps it there (shared, so the kernel's writes land
 * in the file) and launches amk_megakernel(PROGRAM) over G blocks of T threads with BYTES of
 * dynamic shared memory. S = 0 resumes the threads of a block round robin; any other S shuffles
 * the order and preempts threads at memory operations, reproducibly per block. The launch may last
 * SECONDS (default 300) of wall time. The report (JSON: outcome, message, block, thread, task, op,
 * counter, observed, site, stats) goes to FILE, and a line of it to stderr.
 *
 * Exit status: 0 the kernel ran to its end (its own abort flag, in the image, says how it
 * ended); 1 the emulator found a kernel error (divergent barrier, collective misuse, copy or
 * mbarrier misuse, a memory fault, a stack overflow); 3 the threads of a block deadlocked or the
 * launch outlived its deadline; 2 bad arguments or the image could not be mapped.
 * ========================================================================================== */
#include "emu.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define AMK_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AMK_EMU_ASAN 1
#endif
#endif
#ifndef AMK_EMU_ASAN
#define AMK_EMU_ASAN 0
#endif
#if AMK_EMU_ASAN
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old);
extern "C" void __asan_unpoison_memory_region(void const volatile* addr, size_t size);
#endif

#if !defined(__x86_64__) && !defined(AMK_EMU_UCONTEXT)
#define AMK_EMU_UCONTEXT 1 /* the hand-written switch is x86-64 only */
#endif
#if defined(AMK_EMU_UCONTEXT)
#include <ucontext.h>
#endif

/* The kernel translation unit's entry (kernel.cc). */
extern "C" void amk_emu_megakernel(const void* program);

/* The dynamic shared memory the kernels declare `extern __shared__`: one per OS thread = block. */
#define AMK_EMU_SMEM_MAX (256u * 1024u)
thread_local __attribute__((aligned(16))) unsigned char amk_dyn_smem[AMK_EMU_SMEM_MAX];

#if !defined(AMK_EMU_UCONTEXT)
/* amk_emu_switch(save, next): push the callee-saved registers and the SSE/x87 control words on
 * the current stack, store its pointer in *save, load next and pop them from there. */
extern "C" void amk_emu_switch(void** save, void* next);
asm(R"(
    .text
    .globl amk_emu_switch
    .type amk_emu_switch, @function
amk_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    stmxcsr 8(%rsp)
    fnstcw (%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    fldcw (%rsp)
    ldmxcsr 8(%rsp)
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size amk_emu_switch, .-amk_emu_switch
    .section .note.GNU-stack,"",@progbits
    .text
)");
#endif

namespace amk_emu {

thread_local uint3 thread_idx;
thread_local uint3 block_idx;
uint3 block_dim, grid_dim;

namespace {

/* ---- launch configuration -------------------------------------------------------------------- */
struct Config {
    uint64_t base = 0, image_bytes = 0, program = 0, counters = 0, n_counters = 0, seed = 0;
    unsigned grid = 0, threads = 0, smem = 0;
    double timeout_s = 300;
    const char* report = nullptr;
};
Config g_cfg;
const size_t kStackBytes = 256u << 10; /* per fiber, reserved lazily (only the pages it touches) */
const size_t kStackMargin = 32u << 10;  /* a thread that yields with less left has nearly overflowed */
const unsigned char kPoison = 0xFF; /* NaN in every float type */

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
uint64_t g_start_ns = 0;

/* ---- fiber contexts ------------------------------------------------------------------------------ */
#if defined(AMK_EMU_UCONTEXT)
struct Context {
    ucontext_t uc;
};
void context_make(Context& c, unsigned char* stack, size_t bytes, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = bytes;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}
void context_switch(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
#else
struct Context {
    void* sp = nullptr;
};
/* A new context "returns" into entry with the stack aligned as after a call. */
void context_make(Context& c, unsigned char* stack, size_t bytes, void (*entry)()) {
    uint64_t* top = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(stack + bytes)) & ~uintptr_t(15));
    *--top = 0;                                       /* entry's return address: it never returns */
    *--top = reinterpret_cast<uint64_t>(entry);       /* popped by amk_emu_switch's ret */
    for (int r = 0; r < 6; ++r) *--top = 0;           /* rbp rbx r12 r13 r14 r15 */
    *--top = 0x1f80;                                  /* mxcsr: the default */
    *--top = 0x037f;                                  /* x87 control word: the default */
    c.sp = top;
}
void context_switch(Context& from, Context& to) { amk_emu_switch(&from.sp, to.sp); }
#endif

/* ---- the state of a block --------------------------------------------------------------------- */
enum class State : uint8_t { Ready, AtBarrier, AtWarp, Done };

struct Site {
    const char* file = nullptr;
    int line = 0;
    bool operator==(const Site& o) const { return line == o.line && (file == o.file || (file && o.file && !strcmp(file, o.file))); }
    bool operator!=(const Site& o) const { return !(*this == o); }
};

const char* base_name(const char* path) {
    if (!path) return "?";
    const char* s = strrchr(path, '/');
    return s ? s + 1 : path;
}
std::string site_text(const Site& s) { return std::string(base_name(s.file)) + ":" + std::to_string(s.line); }

struct Copy16 {
    unsigned char* dst;
    uint32_t bytes;
    unsigned char data[16];
};

struct Landing {
    unsigned char* dst;
    uint32_t bytes;
    uint64_t* bar;
    unsigned tid;
    std::vector<unsigned char> data;
};

struct Fiber {
    Context ctx;
    unsigned char* stack = nullptr;
    unsigned tid = 0;
    State state = State::Ready;
    Site site;        /* where it waits */
    bool spun = false; /* its last turn ended in a spin poll */
    uint64_t result = 0;
    std::vector<Copy16> open;                /* cp.async since its last commit */
    std::deque<std::vector<Copy16>> groups;  /* committed, not yet waited for */
    void* fake_stack = nullptr;              /* AddressSanitizer's */
};

enum { kShuffle = 1, kVote = 2, kSyncwarp = 3 };
const char* collective_name(int kind) {
    switch (kind) {
        case kShuffle: return "a warp shuffle";
        case kVote:    return "a warp vote";
        default:       return "__syncwarp";
    }
}

/* One warp collective in progress: the lanes of its mask arrive, the last one computes every
 * lane's result. A warp may have several in progress at once when their masks differ (lanes
 * 0-15 shuffling among themselves while lanes 16-31 already wait at a full __syncwarp). */
struct Collective {
    uint32_t arrived = 0, mask = 0;
    int kind = 0, mode = 0, width = 32;
    Site site;
    uint64_t bits[32];
    int arg[32];
};

struct Warp {
    std::vector<Collective> pending;
    uint32_t exited = 0; /* lanes that have exited */
};

struct Mbarrier {
    uint32_t count = 0, pending = 0, phase = 0, in_flight = 0;
    int64_t tx = 0;
};

struct Stats {
    uint64_t barriers = 0, collectives = 0, switches = 0, polls = 0, preemptions = 0, cp_async = 0, bulk = 0,
             mbarrier_waits = 0, counter_polls = 0;
    void add(const Stats& o) {
        barriers += o.barriers;
        collectives += o.collectives;
        switches += o.switches;
        polls += o.polls;
        preemptions += o.preemptions;
        cp_async += o.cp_async;
        bulk += o.bulk;
        mbarrier_waits += o.mbarrier_waits;
        counter_polls += o.counter_polls;
    }
};

struct Block {
    unsigned idx = 0;
    std::vector<Fiber> fibers;
    std::vector<Warp> warps;
    Context sched;
    const void* sched_stack = nullptr;
    size_t sched_stack_bytes = 0;
    void* sched_fake_stack = nullptr;
    unsigned char* stacks = nullptr;
    int live = 0;
    std::vector<unsigned> ready; /* runnable threads in resume order (each at most once) */
    /* the block barrier */
    int bar_arrived = 0, bar_kind = 0, bar_acc = 0;
    bool bar_grid = false;
    Site bar_site;
    /* the copy engine */
    std::unordered_map<uint64_t*, Mbarrier> mbars;
    std::deque<Landing> engine;
    std::unordered_map<uintptr_t, unsigned> in_flight; /* 16-byte shared granule -> the issuing thread */
    std::mt19937_64 rng;
    /* what the block runs and waits for (reports) */
    std::atomic<int32_t> task{-1}, op{-1};
    std::atomic<const uint32_t*> polled{nullptr};
    std::atomic<uint32_t> seen{0};
    std::atomic<bool> finished{false};
    /* sleeping while its threads only spin */
    std::atomic<uint32_t> wake_word{0};
    std::atomic<bool> sleeping{false};
    std::atomic<const void*> sleeping_on{nullptr};
    Stats stats;
};

Block* g_blocks = nullptr;
thread_local Block* tl_block = nullptr;
thread_local Fiber* tl_fiber = nullptr;
std::atomic<uint64_t> g_grid_gen{0};
std::atomic<unsigned> g_grid_arrived{0};

/* ---- reports ------------------------------------------------------------------------------------ */
std::atomic<bool> g_ending{false};

void json_string(FILE* f, const std::string& s) {
    fputc('"', f);
    for (unsigned char c : s) {
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

int64_t counter_index(const uint32_t* p) {
    const uint64_t a = reinterpret_cast<uint64_t>(p);
    if (!p || g_cfg.n_counters == 0 || a < g_cfg.counters || a >= g_cfg.counters + 4 * g_cfg.n_counters || (a & 3)) return -1;
    return (int64_t)((a - g_cfg.counters) / 4);
}

Stats total_stats() {
    Stats s;
    if (g_blocks)
        for (unsigned b = 0; b < g_cfg.grid; ++b) s.add(g_blocks[b].stats);
    return s;
}

/* Writes the report and ends the process with code. b and thread (-1: none) say where. */
[[noreturn]] void finish(const char* outcome, int code, const std::string& message, const Block* b, long thread,
                         const std::string& site) {
    bool expected = false;
    if (!g_ending.compare_exchange_strong(expected, true)) {
        for (;;) pause(); /* another thread is reporting; it ends the process */
    }
    const double ms = (double)(now_ns() - g_start_ns) / 1e6;
    const Stats s = total_stats();
    const int32_t task = b ? b->task.load() : -1, op = b ? b->op.load() : -1;
    const uint32_t* polled = b ? b->polled.load() : nullptr;
    const int64_t counter = counter_index(polled);
    const uint32_t seen = b ? b->seen.load() : 0;
    if (g_cfg.report) {
        if (FILE* f = fopen(g_cfg.report, "w")) {
            fprintf(f, "{\"outcome\": ");
            json_string(f, outcome);
            fprintf(f, ", \"message\": ");
            json_string(f, message);
            fprintf(f, ", \"block\": %ld, \"thread\": %ld, \"task\": %d, \"op\": %d, \"counter\": %lld, \"observed\": %u, \"site\": ",
                    b ? (long)b->idx : -1L, thread, task, op, (long long)counter, seen);
            json_string(f, site);
            fprintf(f,
                    ", \"ms\": %.3f, \"seed\": %llu, \"stats\": {\"barriers\": %llu, \"collectives\": %llu, \"switches\": %llu, "
                    "\"spin_polls\": %llu, \"preemptions\": %llu, \"cp_async\": %llu, \"bulk_copies\": %llu, "
                    "\"mbarrier_waits\": %llu, \"counter_polls\": %llu}}\n",
                    ms, (unsigned long long)g_cfg.seed, (unsigned long long)s.barriers, (unsigned long long)s.collectives,
                    (unsigned long long)s.switches, (unsigned long long)s.polls, (unsigned long long)s.preemptions,
                    (unsigned long long)s.cp_async, (unsigned long long)s.bulk, (unsigned long long)s.mbarrier_waits,
                    (unsigned long long)s.counter_polls);
            fclose(f);
        }
    }
    if (code != 0) {
        fprintf(stderr, "amk-emu: %s: %s", outcome, message.c_str());
        if (b) fprintf(stderr, " [block %u, thread %ld, task %d, op %d]", b->idx, thread, task, op);
        fprintf(stderr, "\n");
    }
    fflush(stderr);
    _exit(code);
}

/* The running thread's kernel error. */
[[noreturn]] void fail_here(const std::string& message, const std::string& site = "") {
    Block* b = tl_block;
    Fiber* f = tl_fiber;
    finish("error", 1, message, b, f ? (long)f->tid : -1L, site);
}

std::string vformat(const char* fmt, va_list ap) {
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    return buf;
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

/* "0-3, 7, 9-12" */
std::string ranges(const std::vector<unsigned>& ids) {
    std::string out;
    for (size_t i = 0; i < ids.size();) {
        size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
        if (!out.empty()) out += ", ";
        out += j == i ? std::to_string(ids[i]) : std::to_string(ids[i]) + "-" + std::to_string(ids[j]);
        i = j + 1;
    }
    return out;
}

/* "thread 5 waits" or "threads 0-4, 6-63 wait" */
std::string who(const std::vector<unsigned>& ids, const char* noun, const char* verb_one, const char* verb_many) {
    return std::string(noun) + (ids.size() == 1 ? " " : "s ") + ranges(ids) + " " + (ids.size() == 1 ? verb_one : verb_many);
}

std::string task_text(const Block& b) {
    const int32_t task = b.task.load(), op = b.op.load();
    if (task < 0) return "before its first task";
    return format("task %d (opcode %d)", task, op);
}

/* What the threads of block b wait at, grouped by site. */
std::string waits_text(const Block& b) {
    std::vector<std::pair<std::string, std::vector<unsigned>>> groups;
    for (const Fiber& f : b.fibers) {
        std::string what;
        switch (f.state) {
            case State::AtBarrier: what = "at __syncthreads " + site_text(f.site); break;
            case State::AtWarp:    what = "at a warp collective " + site_text(f.site); break;
            case State::Done:      what = "exited"; break;
            case State::Ready:     what = "runnable"; break;
        }
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == what; });
        if (it == groups.end())
            groups.push_back({what, {f.tid}});
        else
            it->second.push_back(f.tid);
    }
    std::string out;
    for (auto& g : groups) {
        if (!out.empty()) out += "; ";
        if (g.first == "exited")
            out += who(g.second, "thread", "has exited", "have exited");
        else if (g.first == "runnable")
            out += who(g.second, "thread", "is runnable", "are runnable");
        else
            out += who(g.second, "thread", "waits ", "wait ") + g.first;
    }
    return out;
}

/* ---- scheduling -------------------------------------------------------------------------------- */
void asan_before_switch(void** fake, const void* bottom, size_t bytes) {
#if AMK_EMU_ASAN
    __sanitizer_start_switch_fiber(fake, bottom, bytes);
#else
    (void)fake, (void)bottom, (void)bytes;
#endif
}
void asan_after_switch(void* fake) {
#if AMK_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    (void)fake;
#endif
}

/* From a fiber back to its block's scheduler (the fiber stays in its state). The stacks lie side
 * by side without guard pages (a page each would exceed the kernel's map count on a big grid):
 * the depth is checked here, at every switch, well before the neighbour's stack. */
void yield_to_scheduler() {
    Fiber* f = tl_fiber;
    Block* b = tl_block;
    const unsigned char* sp = static_cast<const unsigned char*>(__builtin_frame_address(0));
    if (sp < f->stack + kStackMargin)
        fail_here(format("thread %u used more than %zu of its %zu KiB emulator stack", f->tid, (kStackBytes - kStackMargin) >> 10,
                         kStackBytes >> 10));
    asan_before_switch(&f->fake_stack, b->sched_stack, b->sched_stack_bytes);
    context_switch(f->ctx, b->sched);
    asan_after_switch(f->fake_stack);
}

/* With a schedule seed, a memory operation sometimes hands the block to another thread. */
void maybe_preempt() {
    Block* b = tl_block;
    if (g_cfg.seed == 0 || !tl_fiber || (b->rng() & 7) != 0) return;
    ++b->stats.preemptions;
    yield_to_scheduler();
}

int futex_wait(std::atomic<uint32_t>* word, uint32_t seen, uint64_t ns) {
#if defined(__linux__)
    timespec ts{(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    return (int)syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
#else
    (void)word, (void)seen;
    timespec ts{0, (long)ns};
    nanosleep(&ts, nullptr);
    return 0;
#endif
}
void futex_wake(std::atomic<uint32_t>* word) {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#else
    (void)word;
#endif
}

/* Wake the blocks sleeping on p (nullptr: every sleeping block). */
void wake_sleepers(const void* p) {
    if (!g_blocks) return;
    for (unsigned i = 0; i < g_cfg.grid; ++i) {
        Block& o = g_blocks[i];
        if (!o.sleeping.load()) continue;
        const void* on = o.sleeping_on.load();
        if (p == nullptr || on == nullptr || on == p) {
            o.wake_word.fetch_add(1);
            futex_wake(&o.wake_word);
        }
    }
}

/* A block whose runnable threads only spun: sleep until another block writes what it polls (its
 * last counter), anything else wakes it, or 2 ms pass (its watchdog reads the clock). */
void idle_wait(Block& b) {
    const uint32_t word = b.wake_word.load();
    const uint32_t* polled = b.polled.load();
    b.sleeping_on.store(polled);
    b.sleeping.store(true);
    if (polled && __atomic_load_n(polled, __ATOMIC_SEQ_CST) != b.seen.load()) {
        b.sleeping.store(false);
        return;
    }
    futex_wait(&b.wake_word, word, 2000000);
    b.sleeping.store(false);
}

void check_deadline(const Block* b) {
    if (g_cfg.timeout_s <= 0) return;
    if ((double)(now_ns() - g_start_ns) / 1e9 <= g_cfg.timeout_s) return;
    std::string msg = format("the launch outlived its deadline of %.0f s", g_cfg.timeout_s);
    std::string detail;
    int shown = 0;
    for (unsigned i = 0; i < g_cfg.grid && shown < 8; ++i) {
        const Block& o = g_blocks[i];
        if (o.finished.load()) continue;
        ++shown;
        const int64_t c = counter_index(o.polled.load());
        detail += format("; block %u runs %s", o.idx, task_text(o).c_str());
        if (c >= 0) detail += format(", last polled counter %lld (saw %u)", (long long)c, o.seen.load());
    }
    finish("timeout", 3, msg + detail, b, -1, "");
}

void resume(Block& b, Fiber& f) {
    tl_fiber = &f;
    thread_idx.x = f.tid;
    f.spun = false;
    ++b.stats.switches;
    asan_before_switch(&b.sched_fake_stack, f.stack, kStackBytes);
    context_switch(b.sched, f.ctx);
    asan_after_switch(b.sched_fake_stack);
    tl_fiber = nullptr;
}

bool engine_step(Block& b, bool all);

void fiber_main() {
    asan_after_switch(nullptr);
    Block& b = *tl_block;
    amk_emu_megakernel(reinterpret_cast<const void*>(g_cfg.program));
    Fiber& f = *tl_fiber;
    if (!f.open.empty() || !f.groups.empty())
        fail_here(format("thread %u exited with %zu cp.async group(s) it never waited for (cp.async.wait_group)", f.tid,
                         f.groups.size() + (f.open.empty() ? 0 : 1)));
    f.state = State::Done;
    --b.live;
    b.warps[f.tid / 32].exited |= 1u << (f.tid % 32);
    if (b.bar_arrived > 0)
        fail_here(format("thread %u exited while %d thread(s) wait at __syncthreads %s (undefined on a GPU: the barrier may "
                         "never complete)",
                         f.tid, b.bar_arrived, site_text(b.bar_site).c_str()));
    for (const Collective& c : b.warps[f.tid / 32].pending)
        if (c.mask >> (f.tid % 32) & 1u)
            fail_here(format("thread %u exited while lanes of its warp wait for it at %s %s", f.tid, collective_name(c.kind),
                             site_text(c.site).c_str()));
    asan_before_switch(nullptr, b.sched_stack, b.sched_stack_bytes);
    context_switch(f.ctx, b.sched);
    fail_here("a finished thread was resumed");
}

/* The threads of b can never run again: report who waits where. */
[[noreturn]] void deadlock(Block& b) {
    finish("deadlock", 3,
           format("deadlock inside block %u (%s): no thread can run: %s", b.idx, task_text(b).c_str(), waits_text(b).c_str()),
           &b, -1, "");
}

void* run_block(void* arg) {
    Block& b = *static_cast<Block*>(arg);
    tl_block = &b;
    block_idx = uint3{b.idx, 0u, 0u};
#if AMK_EMU_ASAN
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void* addr;
        size_t size;
        pthread_attr_getstack(&attr, &addr, &size);
        b.sched_stack = addr;
        b.sched_stack_bytes = size;
        pthread_attr_destroy(&attr);
    }
#endif
    /* the fault handler's stack (AddressSanitizer installs and removes its own) */
    stack_t alt;
    alt.ss_size = 64 << 10;
    alt.ss_flags = 0;
    alt.ss_sp = AMK_EMU_ASAN ? nullptr : mmap(nullptr, alt.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (alt.ss_sp && alt.ss_sp != MAP_FAILED) sigaltstack(&alt, nullptr);

#if AMK_EMU_ASAN
    /* glibc places static TLS just above the thread's stack; stale stack poison may cover it */
    __asan_unpoison_memory_region(amk_dyn_smem, sizeof amk_dyn_smem);
#endif
    memset(amk_dyn_smem, kPoison, sizeof amk_dyn_smem); /* shared memory starts undefined */
    const unsigned n = g_cfg.threads;
    b.fibers.resize(n);
    b.warps.resize((n + 31) / 32);
    b.live = (int)n;
    b.rng.seed(g_cfg.seed * 0x9E3779B97F4A7C15ull + b.idx);
    b.stacks = static_cast<unsigned char*>(
        mmap(nullptr, kStackBytes * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (b.stacks == MAP_FAILED) finish("error", 2, format("cannot reserve %u fiber stacks of %zu KiB", n, kStackBytes >> 10), &b, -1, "");
    for (unsigned t = 0; t < n; ++t) {
        Fiber& f = b.fibers[t];
        f.tid = t;
        f.stack = b.stacks + (size_t)t * kStackBytes;
        context_make(f.ctx, f.stack, kStackBytes, fiber_main);
    }
    for (unsigned t = 0; t < n; ++t) b.ready.push_back(t);
    std::vector<unsigned> turn;
    uint64_t rounds = 0;
    /* A round gives every runnable thread one turn (round robin, or in a seeded random order);
     * a thread that stays runnable (a spin poll, a preemption) queues for the next round, a
     * thread released from a barrier or a collective joins it when released. */
    while (b.live > 0) {
        turn.clear();
        turn.swap(b.ready);
        if (g_cfg.seed) std::shuffle(turn.begin(), turn.end(), b.rng);
        bool busy = false;
        for (unsigned tid : turn) {
            Fiber& f = b.fibers[tid];
            resume(b, f);
            if (!f.spun) busy = true;
            if (f.state == State::Ready) b.ready.push_back(tid);
        }
        if (engine_step(b, false)) busy = true;
        if (b.live == 0) break;
        if (turn.empty() && b.ready.empty()) deadlock(b);
        if (!busy) idle_wait(b);
        if ((++rounds & 63) == 0 || !busy) check_deadline(&b);
    }
    if (!b.engine.empty()) {
        const Landing& l = b.engine.front();
        finish("error", 1,
               format("block %u ended with %zu bulk copies in flight (the first by thread %u, %u bytes to shared offset %ld)",
                      b.idx, b.engine.size(), l.tid, l.bytes, (long)(l.dst - amk_dyn_smem)),
               &b, -1, "");
    }
    munmap(b.stacks, kStackBytes * n);
    b.finished.store(true);
    wake_sleepers(nullptr);
    if (alt.ss_sp && alt.ss_sp != MAP_FAILED) {
        stack_t off;
        off.ss_sp = nullptr;
        off.ss_size = 0;
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, nullptr);
        munmap(alt.ss_sp, alt.ss_size);
    }
    return nullptr;
}

/* ---- faults ------------------------------------------------------------------------------------ */
void on_fault(int sig, siginfo_t* si, void*) {
    Block* b = tl_block;
    Fiber* f = tl_fiber;
    const uint64_t a = reinterpret_cast<uint64_t>(si->si_addr);
    std::string msg = format("%s at address 0x%llx", sig == SIGFPE ? "arithmetic fault" : "memory fault", (unsigned long long)a);
    if (sig != SIGFPE) {
        if (a >= g_cfg.base && a < g_cfg.base + g_cfg.image_bytes)
            msg += " (inside the device memory image)";
        else
            msg += format(" (outside the device memory image [0x%llx, 0x%llx))", (unsigned long long)g_cfg.base,
                          (unsigned long long)(g_cfg.base + g_cfg.image_bytes));
        if (f && a < reinterpret_cast<uint64_t>(f->stack) + kStackBytes && a + (64u << 10) >= reinterpret_cast<uint64_t>(f->stack))
            msg += format(": thread %u's stack overflowed", f->tid);
    }
    finish("error", 1, msg, b, f ? (long)f->tid : -1L, "");
}

}  // namespace

/* ---- the runtime's interface (emu.h) ------------------------------------------------------------ */

namespace {
/* The grid-wide part of the grid barrier, run by each block's last thread to arrive: it waits
 * until the last thread of every block has arrived. */
void grid_arrive(Block& b) {
    const uint64_t gen = g_grid_gen.load();
    if (g_grid_arrived.fetch_add(1) + 1 == g_cfg.grid) {
        g_grid_arrived.store(0);
        g_grid_gen.fetch_add(1);
        wake_sleepers(nullptr);
        return;
    }
    while (g_grid_gen.load() == gen) {
        const uint32_t word = b.wake_word.load();
        b.sleeping_on.store(nullptr);
        b.sleeping.store(true);
        if (g_grid_gen.load() == gen) futex_wait(&b.wake_word, word, 2000000);
        b.sleeping.store(false);
        check_deadline(&b);
    }
}

/* A thread arrives at the block barrier of kind (grid: the block part of the grid barrier) at
 * site; every live thread of the block must arrive at the same one. Returns the reduction. */
int arrive(int kind, int pred, const Site& site, bool grid) {
    Block& b = *tl_block;
    Fiber& f = *tl_fiber;
    const char* what = grid ? "the grid barrier" : "__syncthreads";
    if (b.bar_arrived == 0) {
        b.bar_kind = kind;
        b.bar_site = site;
        b.bar_grid = grid;
        b.bar_acc = kind == kBarAnd ? 1 : 0;
    } else if (b.bar_site != site || b.bar_kind != kind || b.bar_grid != grid) {
        std::vector<unsigned> waiting;
        for (const Fiber& o : b.fibers)
            if (o.state == State::AtBarrier) waiting.push_back(o.tid);
        fail_here(format("barrier divergence in block %u (%s): thread %u reached %s at %s while %s at %s %s", b.idx,
                         task_text(b).c_str(), f.tid, what, site_text(site).c_str(), who(waiting, "thread", "waits", "wait").c_str(),
                         b.bar_grid ? "the grid barrier" : "__syncthreads", site_text(b.bar_site).c_str()),
                  site_text(site));
    }
    switch (kind) {
        case kBarCount: b.bar_acc += pred; break;
        case kBarAnd:   b.bar_acc &= pred; break;
        case kBarOr:    b.bar_acc |= pred; break;
        default:        break;
    }
    f.site = site;
    if (++b.bar_arrived < b.live) {
        f.state = State::AtBarrier;
        yield_to_scheduler();
        return (int)f.result;
    }
    if (grid) grid_arrive(b);
    const int result = b.bar_acc;
    b.bar_arrived = 0;
    ++b.stats.barriers;
    for (Fiber& o : b.fibers)
        if (o.state == State::AtBarrier) {
            o.state = State::Ready;
            o.result = (uint64_t)result;
            b.ready.push_back(o.tid);
        }
    if (g_cfg.seed) yield_to_scheduler(); /* let another thread leave the barrier first */
    return result;
}
}  // namespace

int barrier(int kind, int pred, const char* file, int line) { return arrive(kind, pred, Site{file, line}, false); }
void grid_sync(const char* file, int line) { (void)arrive(kBarSync, 0, Site{file, line}, true); }

namespace {
/* The lane joins its warp's collective; returns its result when every lane of the mask has. */
uint64_t collective(int kind, unsigned mask, int mode, int arg, int width, uint64_t bits, const char* file, int line) {
    Block& b = *tl_block;
    Fiber& f = *tl_fiber;
    const unsigned lane = f.tid % 32, w = f.tid / 32;
    const Site site{file, line};
    Warp& wp = b.warps[w];
    if (!(mask >> lane & 1u))
        fail_here(format("lane %u of warp %u calls %s at %s with mask 0x%08x, which leaves it out", lane, w,
                         collective_name(kind), site_text(site).c_str(), mask),
                  site_text(site));
    if (width < 1 || width > 32 || (width & (width - 1)))
        fail_here(format("a warp shuffle at %s with width %d (want a power of two up to 32)", site_text(site).c_str(), width),
                  site_text(site));
    if (const uint32_t gone = mask & wp.exited)
        fail_here(format("%s at %s waits for lane %d of warp %u, which has exited (mask 0x%08x)", collective_name(kind),
                         site_text(site).c_str(), __builtin_ctz(gone), w, mask),
                  site_text(site));
    /* The collective of this mask in progress, if any: the lanes of one mask must reach the same
     * call site (a GPU might pair differing sites up; amk's kernels never mean to). */
    size_t ci = 0;
    while (ci < wp.pending.size() && wp.pending[ci].mask != mask) ++ci;
    if (ci == wp.pending.size()) {
        Collective fresh;
        fresh.kind = kind;
        fresh.mask = mask;
        fresh.mode = mode;
        fresh.width = width;
        fresh.site = site;
        wp.pending.push_back(fresh);
    }
    Collective& c = wp.pending[ci];
    if (c.kind != kind || c.mode != mode || c.width != width || c.site != site || (c.arrived >> lane & 1u)) {
        std::vector<unsigned> waiting;
        for (unsigned l = 0; l < 32; ++l)
            if (c.arrived >> l & 1u) waiting.push_back(l);
        fail_here(format("warp divergence in block %u warp %u (%s): lane %u reached %s at %s (mask 0x%08x) while %s at "
                         "%s %s with the same mask",
                         b.idx, w, task_text(b).c_str(), lane, collective_name(kind), site_text(site).c_str(), mask,
                         who(waiting, "lane", "waits", "wait").c_str(), collective_name(c.kind), site_text(c.site).c_str()),
                  site_text(site));
    }
    c.bits[lane] = bits;
    c.arg[lane] = arg;
    c.arrived |= 1u << lane;
    f.site = site;
    if (c.arrived != mask) {
        f.state = State::AtWarp;
        yield_to_scheduler();
        return f.result;
    }
    /* the last lane: every lane's result */
    ++b.stats.collectives;
    uint32_t ballot = 0;
    for (unsigned l = 0; l < 32; ++l)
        if ((mask >> l & 1u) && c.bits[l]) ballot |= 1u << l;
    for (unsigned l = 0; l < 32; ++l) {
        if (!(mask >> l & 1u)) continue;
        uint64_t r = 0;
        if (kind == kShuffle) {
            const unsigned lo = l & ~(unsigned)(c.width - 1), hi = lo + (unsigned)c.width;
            long src = l;
            switch (c.mode) {
                case 0: src = lo + ((unsigned)c.arg[l] & (unsigned)(c.width - 1)); break;
                case 1: src = (long)(l ^ (unsigned)c.arg[l]); if (src >= (long)hi) src = l; break;
                case 2: src = (long)l + c.arg[l]; if (src >= (long)hi) src = l; break;
                default: src = (long)l - c.arg[l]; if (src < (long)lo) src = l; break;
            }
            if (src < 0 || src > 31 || !(mask >> src & 1u))
                fail_here(format("lane %u of warp %u shuffles from lane %ld at %s, which is not in the mask 0x%08x", l, w, src,
                                 site_text(c.site).c_str(), mask),
                          site_text(c.site));
            r = c.bits[src];
        } else if (kind == kVote) {
            r = c.mode == 0 ? ballot : c.mode == 1 ? (ballot != 0) : (ballot == mask);
        }
        Fiber& o = b.fibers[w * 32 + l];
        o.result = r;
        if (o.state == State::AtWarp) {
            o.state = State::Ready;
            b.ready.push_back(o.tid);
        }
    }
    const uint64_t mine = f.result;
    wp.pending.erase(wp.pending.begin() + (long)ci);
    if (g_cfg.seed) yield_to_scheduler();
    return mine;
}
}  // namespace

uint64_t warp_shuffle(unsigned mask, uint64_t bits, int mode, int arg, int width, const char* file, int line) {
    return collective(kShuffle, mask, mode, arg, width, bits, file, line);
}
unsigned warp_vote(unsigned mask, int pred, int mode, const char* file, int line) {
    return (unsigned)collective(kVote, mask, mode, 0, 32, (uint64_t)(pred != 0), file, line);
}
void warp_sync(unsigned mask, const char* file, int line) { (void)collective(kSyncwarp, mask, 0, 0, 32, 0, file, line); }
unsigned active_mask() {
    const Block& b = *tl_block;
    const unsigned w = tl_fiber->tid / 32;
    unsigned m = 0;
    for (unsigned l = 0; l < 32 && w * 32 + l < b.fibers.size(); ++l)
        if (b.fibers[w * 32 + l].state != State::Done) m |= 1u << l;
    return m;
}

void memory_event() {
    wake_sleepers(nullptr);
    maybe_preempt();
}
void sleep_ns(unsigned) {
    ++tl_block->stats.polls;
    tl_fiber->spun = true;
    yield_to_scheduler();
}
void fence_acq_rel() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    maybe_preempt();
}

uint32_t dynamic_smem_bytes() { return g_cfg.smem; }
uint64_t globaltimer_ns() { return now_ns(); }
void prefetch_l2(const void*) {}

uint32_t load_acquire(const uint32_t* p) {
    Block& b = *tl_block;
    const uint32_t v = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    ++b.stats.counter_polls;
    b.polled.store(p, std::memory_order_relaxed);
    b.seen.store(v, std::memory_order_relaxed);
    maybe_preempt();
    return v;
}
void reduce_add_release(uint32_t* p, uint32_t v) {
    __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    wake_sleepers(p);
    maybe_preempt();
}

namespace {
bool in_dynamic_smem(const void* p, uint32_t bytes) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    return c >= amk_dyn_smem && c + bytes <= amk_dyn_smem + g_cfg.smem;
}

/* Marks the 16-byte granules of [dst, dst + bytes) as written by a copy in flight; a second copy
 * to bytes that still have one in flight is a race between the two. */
void claim(Block& b, unsigned char* dst, uint32_t bytes, unsigned tid, const char* what) {
    for (uintptr_t g = reinterpret_cast<uintptr_t>(dst) & ~uintptr_t(15); g < reinterpret_cast<uintptr_t>(dst) + bytes; g += 16) {
        auto it = b.in_flight.find(g);
        if (it != b.in_flight.end())
            fail_here(format("%s by thread %u to shared offset %ld while a copy by thread %u to the same bytes is still in flight "
                             "(the two race)",
                             what, tid, (long)(reinterpret_cast<unsigned char*>(g) - amk_dyn_smem), it->second));
        b.in_flight.emplace(g, tid);
    }
}
void release(Block& b, unsigned char* dst, uint32_t bytes) {
    for (uintptr_t g = reinterpret_cast<uintptr_t>(dst) & ~uintptr_t(15); g < reinterpret_cast<uintptr_t>(dst) + bytes; g += 16)
        b.in_flight.erase(g);
}

Mbarrier& mbarrier_of(Block& b, uint64_t* bar, const char* what) {
    auto it = b.mbars.find(bar);
    if (it == b.mbars.end())
        fail_here(format("%s on the mbarrier at %p, which was never initialised (mbarrier.init) in block %u", what,
                         static_cast<void*>(bar), b.idx));
    return it->second;
}

void complete_phase(Mbarrier& m) {
    if (m.pending == 0 && m.tx == 0) {
        m.phase ^= 1u;
        m.pending = m.count;
    }
}

/* Lands one bulk copy of the block's engine (all: every one); false if none was in flight. */
bool engine_step(Block& b, bool all) {
    bool landed = false;
    while (!b.engine.empty()) {
        const size_t i = g_cfg.seed ? (size_t)(b.rng() % b.engine.size()) : 0;
        Landing l = std::move(b.engine[i]);
        b.engine.erase(b.engine.begin() + (long)i);
        memcpy(l.dst, l.data.data(), l.bytes);
        release(b, l.dst, l.bytes);
        Mbarrier& m = mbarrier_of(b, l.bar, "a bulk copy completes");
        m.tx -= l.bytes;
        --m.in_flight;
        if (m.tx < 0)
            fail_here(format("the mbarrier at %p received %u more transaction bytes than were announced (expect_tx)",
                             static_cast<void*>(l.bar), (unsigned)-m.tx));
        complete_phase(m);
        landed = true;
        if (!all) break;
    }
    return landed;
}
}  // namespace

void cp_async(void* smem, const void* gmem, uint32_t bytes) {
    Block& b = *tl_block;
    Fiber& f = *tl_fiber;
    unsigned char* dst = static_cast<unsigned char*>(smem);
    if (!in_dynamic_smem(smem, bytes) || (reinterpret_cast<uintptr_t>(smem) % bytes) != 0 ||
        (reinterpret_cast<uintptr_t>(gmem) % bytes) != 0)
        fail_here(format("cp.async of %u bytes from %p to %p: the destination must be %u-byte aligned inside the launch's "
                         "%u bytes of dynamic shared memory and the source aligned",
                         bytes, gmem, smem, bytes, g_cfg.smem));
    claim(b, dst, bytes, f.tid, "cp.async");
    Copy16 c;
    c.dst = dst;
    c.bytes = bytes;
    memcpy(c.data, gmem, bytes); /* the source as it is when the copy is issued */
    memset(dst, kPoison, bytes); /* not there until the group is waited for */
    f.open.push_back(c);
    ++b.stats.cp_async;
    maybe_preempt();
}
void cp_async_commit() {
    Fiber& f = *tl_fiber;
    f.groups.push_back(std::move(f.open));
    f.open.clear();
    maybe_preempt();
}
void cp_async_wait(int pending) {
    Block& b = *tl_block;
    Fiber& f = *tl_fiber;
    while ((int)f.groups.size() > pending) {
        for (const Copy16& c : f.groups.front()) {
            memcpy(c.dst, c.data, c.bytes);
            release(b, c.dst, c.bytes);
        }
        f.groups.pop_front();
    }
    maybe_preempt();
}
void fence_proxy_async() { maybe_preempt(); }

void mbarrier_init(uint64_t* bar, uint32_t count) {
    Block& b = *tl_block;
    if (count == 0 || count > (1u << 20)) fail_here(format("mbarrier.init with count %u (want 1 to 2^20)", count));
    auto it = b.mbars.find(bar);
    if (it != b.mbars.end() && it->second.in_flight > 0)
        fail_here(format("mbarrier.init of the mbarrier at %p while %u bulk copies still complete on it",
                         static_cast<void*>(bar), it->second.in_flight));
    Mbarrier m;
    m.count = m.pending = count;
    b.mbars[bar] = m;
    *bar = 0;
}
void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    Block& b = *tl_block;
    Mbarrier& m = mbarrier_of(b, bar, "mbarrier.arrive.expect_tx");
    if (m.pending == 0)
        fail_here(format("mbarrier.arrive.expect_tx on the mbarrier at %p, whose current phase already has its %u arrival(s): "
                         "its previous copy has not landed (a wait skipped, or the wrong phase parity)",
                         static_cast<void*>(bar), m.count));
    m.tx += bytes;
    --m.pending;
    complete_phase(m);
    maybe_preempt();
}
void cp_async_bulk(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar) {
    Block& b = *tl_block;
    Fiber& f = *tl_fiber;
    Mbarrier& m = mbarrier_of(b, bar, "cp.async.bulk");
    if (bytes == 0 || bytes % 16 || (reinterpret_cast<uintptr_t>(smem) & 15) || (reinterpret_cast<uintptr_t>(gmem) & 15) ||
        !in_dynamic_smem(smem, bytes))
        fail_here(format("cp.async.bulk of %u bytes from %p to %p: want a multiple of 16 bytes, both ends 16-byte aligned, the "
                         "destination inside the launch's %u bytes of dynamic shared memory",
                         bytes, gmem, smem, g_cfg.smem));
    unsigned char* dst = static_cast<unsigned char*>(smem);
    claim(b, dst, bytes, f.tid, "cp.async.bulk");
    Landing l{dst, bytes, bar, f.tid, std::vector<unsigned char>(static_cast<const unsigned char*>(gmem),
                                                                   static_cast<const unsigned char*>(gmem) + bytes)};
    memset(dst, kPoison, bytes);
    b.engine.push_back(std::move(l));
    ++m.in_flight;
    ++b.stats.bulk;
    maybe_preempt();
}
uint32_t mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
    Block& b = *tl_block;
    ++b.stats.mbarrier_waits;
    /* the phase of parity `parity` has completed when the current phase has the other parity */
    if ((mbarrier_of(b, bar, "mbarrier.try_wait.parity").phase & 1u) != (parity & 1u)) return 1;
    if (!g_cfg.seed || (b.rng() & 1)) engine_step(b, false); /* the copy engine runs while someone waits */
    if ((mbarrier_of(b, bar, "mbarrier.try_wait.parity").phase & 1u) != (parity & 1u)) return 1;
    sleep_ns(0);
    return 0;
}
void trace_task(int32_t task, int32_t op) {
    Block& b = *tl_block;
    b.task.store(task, std::memory_order_relaxed);
    b.op.store(op, std::memory_order_relaxed);
}

void kernel_error(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    fail_here(s);
}

}  // namespace amk_emu

/* ---- the command line ------------------------------------------------------------------------------ */
namespace {
using amk_emu::g_cfg;

[[noreturn]] void usage(const char* why) {
    fprintf(stderr,
            "amk-emu: %s\nusage: amk-emu --image FILE --base ADDR --program ADDR --grid G --threads T --smem BYTES\n"
            "               [--counters ADDR --counters-n N] [--seed S] [--timeout-s SECONDS] [--report FILE]\n",
            why);
    exit(2);
}

uint64_t number(const char* flag, const char* s, uint64_t lo, uint64_t hi) {
    if (!s) usage((std::string(flag) + " needs a value").c_str());
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 0);
    if (errno || !end || *end || *s == '-' || v < lo || v > hi)
        usage((std::string(flag) + " " + s + ": want a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]").c_str());
    return v;
}
}  // namespace

int main(int argc, char** argv) {
    using namespace amk_emu;
    const char* image = nullptr;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!strcmp(a, "--image")) image = v;
        else if (!strcmp(a, "--base")) g_cfg.base = number(a, v, 1, ~0ull);
        else if (!strcmp(a, "--program")) g_cfg.program = number(a, v, 1, ~0ull);
        else if (!strcmp(a, "--counters")) g_cfg.counters = number(a, v, 0, ~0ull);
        else if (!strcmp(a, "--counters-n")) g_cfg.n_counters = number(a, v, 0, 1u << 30);
        else if (!strcmp(a, "--grid")) g_cfg.grid = (unsigned)number(a, v, 1, 4096);
        else if (!strcmp(a, "--threads")) g_cfg.threads = (unsigned)number(a, v, 32, 1024);
        else if (!strcmp(a, "--smem")) g_cfg.smem = (unsigned)number(a, v, 0, AMK_EMU_SMEM_MAX);
        else if (!strcmp(a, "--seed")) g_cfg.seed = number(a, v, 0, ~0ull);
        else if (!strcmp(a, "--timeout-s")) g_cfg.timeout_s = (double)number(a, v, 1, 86400);
        else if (!strcmp(a, "--report")) g_cfg.report = v;
        else usage((std::string("unknown argument ") + a).c_str());
        ++i;
    }
    if (!image || !g_cfg.base || !g_cfg.program || !g_cfg.grid || !g_cfg.threads)
        usage("--image, --base, --program, --grid and --threads are required");
    if (g_cfg.threads % 32) usage("--threads must be a multiple of 32");
    if (g_cfg.base & 0xfff) usage("--base must be page aligned");

    const int fd = open(image, O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
        fprintf(stderr, "amk-emu: cannot open the image %s: %s\n", image, strerror(errno));
        return 2;
    }
    g_cfg.image_bytes = (uint64_t)st.st_size;
    if (g_cfg.program < g_cfg.base || g_cfg.program >= g_cfg.base + g_cfg.image_bytes) usage("--program is outside the image");
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE MAP_FIXED
#endif
    void* m = mmap(reinterpret_cast<void*>(g_cfg.base), g_cfg.image_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE,
                   fd, 0);
    if (m == MAP_FAILED || reinterpret_cast<uint64_t>(m) != g_cfg.base) {
        fprintf(stderr, "amk-emu: cannot map the image at 0x%llx: %s\n", (unsigned long long)g_cfg.base,
                m == MAP_FAILED ? strerror(errno) : "the kernel placed it elsewhere");
        return 2;
    }
    close(fd);

    if (!AMK_EMU_ASAN) { /* AddressSanitizer reports faults itself, with more detail */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigaction(SIGSEGV, &sa, nullptr);
        sigaction(SIGBUS, &sa, nullptr);
        sigaction(SIGFPE, &sa, nullptr);
    }

    block_dim = uint3{g_cfg.threads, 1u, 1u};
    grid_dim = uint3{g_cfg.grid, 1u, 1u};
    g_start_ns = now_ns();
    std::vector<Block> blocks(g_cfg.grid);
    g_blocks = blocks.data();
    std::vector<pthread_t> threads(g_cfg.grid);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (8u << 20) + AMK_EMU_SMEM_MAX);
    for (unsigned i = 0; i < g_cfg.grid; ++i) {
        blocks[i].idx = i;
        if (pthread_create(&threads[i], &attr, run_block, &blocks[i]) != 0)
            finish("error", 2, format("cannot start the thread of block %u of %u: %s", i, g_cfg.grid, strerror(errno)), nullptr, -1, "");
    }
    pthread_t watchdog; /* the deadline, also for threads that never reach the runtime again */
    pthread_create(&watchdog, nullptr, [](void*) -> void* {
        for (;;) {
            timespec ts{0, 200000000};
            nanosleep(&ts, nullptr);
            check_deadline(nullptr);
        }
    }, nullptr);
    for (unsigned i = 0; i < g_cfg.grid; ++i) pthread_join(threads[i], nullptr);
    finish("ok", 0, "", nullptr, -1, "");
}
