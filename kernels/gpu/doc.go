// Package gpu is the trial.Launcher of a CUDA device: the bridge between the
// one evaluation pipeline (package trial) and the supervised launcher child
// of package kernels/launch.
//
// Launcher.Time first checks correctness on the device, then times. The
// check runs the trial's check model (the model itself, or its layer
// truncation when trial checks a truncation) on the GPU through every
// decode position up to the trial's: the history tokens of
// trial.HistoryToken, then the trial's token, with the KV caches carried in
// device memory — launch Update when the next position's program has the
// same layout (docs/spec/rules.md R28), otherwise a reload with the caches read back and bound
// again. The final logits are compared with the reference VM's
// (TimeRequest.Expected) by vm.Compare at the model dtype; a mismatch is a
// *trial.MismatchError, which trial turns into correct=false, never a
// latency. The candidate (the check handle itself unless the check model
// was truncated) is then timed interleaved (ABBA, after warm-up) with the
// incumbent lowered at the same position on the same device (docs/spec/rules.md R7); the
// incumbent stays resident between trials until it changes or the child
// restarts. After the timed launches the candidate's logits are read back
// (launch op "read") and must equal, bit for bit, those of its checked
// launch (or, for a truncated check, of one untimed launch at the trial's
// step): every timed launch ran the same step on the same inputs, so a
// difference is a race in the schedule and the trial is incorrect. A GPU evaluation never falls back to a prediction (docs/spec/rules.md R24).
// Greedy runs a greedy decode on the device with the same machinery (the GPU
// counterpart of the eager oracle's greedy decode).
//
// Weights: the child builds them itself from a WeightSource naming the
// model (its full shape, dtype included) and the seed of trial's model cache
// (trial.WeightSeed) or its safetensors files (every shard of a
// checkpoint); WeightProvider is that resolver. model.InitWeights draws
// every tensor from its own key-seeded stream, so the full model's weights
// contain a truncated check model's, as a checkpoint's do.
//
// Failures: every child or launch failure is a *trial.LaunchError carrying
// the class of kernels/launch (Status.Class, RemoteError.Class): a trap or a
// failed launch is "crash", the device watchdog, the driver watchdog or a
// request deadline is "timeout", a refusal before launch (CheckDevice,
// co-residency, shared memory, knob ranges) is "rejected" (trial reports
// valid=false), a child that cannot start is "infra". A problem with the
// incumbent never fails the candidate: a refusal times the candidate alone
// with a note, a child failure is "infra" (retried).
//
// On the CPU emulator (the child's device reports launch.Info.Emulator)
// Time checks exactly as above, then launches the
// checked step once more, under the next thread schedule, and requires the
// same logits bit for bit; the latency is the cost model's, labelled
// predicted, and the verdict's notes say the kernels ran on the emulator.
// RunProgram (trial.ProgramDevice) runs a program file's step from given KV
// caches, for amkctl verify.
//
// Devices are matched to a target record at start (launch.MatchTarget, docs/spec/rules.md R1):
// a GPU without one is refused. A trial for another target is measured and
// labelled with the trial's target, and the verdict notes the difference.
//
// Processes: Open starts the child as a hidden subcommand of the running
// binary (ChildCommand, served by ChildMain; OpenLocal for this executable,
// a CUDA ordinal or a target to emulate) with the operator's toolchain
// (build.ToolchainFromEnv: AMK_NVCC, AMK_NVCC_HOST_ARGS; AMK_CXX for the
// emulator) and the host's shared build cache (build.CacheDirFromEnv:
// AMK_KERNEL_CACHE). Nothing here imports
// gorgonia.org/cu: the default build compiles and tests everything with a
// fake device; only the child's launch.Open needs the cuda build tag.
package gpu
