// Package launch runs compiled kernels on a GPU and keeps the worker alive
// when they misbehave.
//
// Device is one GPU driven from one OS thread: Open (the cuda build tag;
// gorgonia.org/cu plus a small cgo file for cuLaunchCooperativeKernel and
// cuFuncSetAttribute) or ErrNoCUDA in the default build ("built without CUDA
// support (rebuild with -tags cuda)"). Load marshals a program
// (kernels.MarshalProgram), checks co-residency with the occupancy API at the
// variant's block size and dynamic shared memory (docs/spec/rules.md R24), uploads the tables,
// the weights and a zeroed activation arena; Run zeroes counters and the
// abort block, launches cooperatively, synchronises, reads the abort flag and
// amk_diag_t (StatusOK, TRAP, WATCHDOG; TIMEOUT for the driver watchdog;
// ERROR) and reads back the requested buffers; TimeInterleaved times a
// candidate and an incumbent alternately (ABBA) with CUDA events after
// warm-up launches and returns both Stats and their ratio (docs/spec/rules.md R7); OpRunner
// runs the Loop-1 entry kernels; BufferReader reads buffers back without a
// launch (what the last launch left). FloorGuard withholds a latency below a
// bandwidth floor (the program's streamed-bytes floor, or an op's bytes
// floor); MatchTarget maps the live device to its ir target record and
// refuses a GPU without one (docs/spec/rules.md R1).
//
// The CPU emulator is a Device too (OpenEmulator, EmulatorInfo): it stands
// in for a CUDA target record (its SM count bounds the grid, its
// architecture picks the kernels' code paths, its shared memory the
// launch's), takes as its module the executable of build.BuildEmulator
// (EmulatorModules: the image is the executable's path), lays every loaded
// program out in a file of device memory exactly as the CUDA device's Load
// does, and runs each launch in an emulator process mapped over it, under
// the next thread-schedule seed. A kernel error the emulator reports
// (divergence, collective or copy misuse, a fault) is a run with status
// ERROR, a deadlock or a launch past its deadline one with TIMEOUT, both
// with the emulator's message naming block, thread, task, opcode and
// counter; the kernel's own traps and watchdog come back as on a GPU. It
// never times: TimeInterleaved refuses. RunChild serves it when
// ChildConfig.Emulator is set.
//
// Supervised child: the gpuworker runs the launcher as a child process per
// device (a hidden subcommand that calls Serve with a Server over Open's
// Device, a BuilderModules cache and a WeightProvider) and talks to it
// through Supervisor/Client: newline-delimited JSON frames, one request at a
// time (hello, load, update, run, time, read, unload, shutdown). A request
// that outlives its context kills the child (process group) and fails with
// class "timeout"; a child that dies or breaks the protocol fails with
// "crash" and its stderr tail; a child still there KillWait after its kill
// (stuck in the driver after a GPU fault) is abandoned and the call fails
// with "infra", so the worker never waits on it; the next call starts a
// fresh child (Generation tells the
// caller to reload its handles). Deterministic refusals (CheckDevice,
// bindings, co-residency, config) come back as class "rejected" and leave the
// child running; a failed launch poisons the CUDA context, so the child
// answers and exits. Watchdog and trap statuses are ordinary answers: the
// same child serves the next trial.
//
// Unverified without a GPU: everything in cuda.go at run time. The pure-Go
// parts (protocol, supervisor, server glue, stats, target matching) are
// tested here with a fake device in a re-executed test binary.
package launch
