/* amk CPU emulator (kernels/emu): the cooperative groups amk's kernels use. The grid barrier
 * is real: every block of the launch is resident (one OS thread each). */
#ifndef AMK_EMU_COOPERATIVE_GROUPS_H
#define AMK_EMU_COOPERATIVE_GROUPS_H

namespace cooperative_groups {
struct grid_group {
    void sync(AMK_EMU_SITE) { amk_emu::grid_sync(file, line); }
    bool is_valid() const { return true; }
    unsigned long long size() const { return (unsigned long long)gridDim.x * blockDim.x; }
};
static inline grid_group this_grid() { return grid_group{}; }
struct thread_block {
    void sync(AMK_EMU_SITE) { amk_emu::barrier(amk_emu::kBarSync, 0, file, line); }
};
static inline thread_block this_thread_block() { return thread_block{}; }
}  // namespace cooperative_groups

#endif /* AMK_EMU_COOPERATIVE_GROUPS_H */
