/* The kernel translation unit of the CPU emulator: kernels/cuda/megakernel.cu, compiled for the
 * host with emu.h force-included (kernels/build: BuildEmulator), and the one symbol the runtime
 * launches. */
#include "megakernel.cu"

extern "C" void amk_emu_megakernel(const void* program) { amk_megakernel(static_cast<const amk_program_t*>(program)); }
