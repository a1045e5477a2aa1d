// Package trial is the one evaluation pipeline that both the embedded and the
// distributed modes call: a Spec (model, target, schedule point) goes in, an
// honest Verdict comes out. The pipeline parses and type-checks the point,
// lowers it, validates the program, checks launch feasibility against the
// target, runs the CPU reference VM against the eager oracle, and only then
// asks a Launcher for a latency (a cost-model prediction on the CPU, a timed
// launch on a GPU). No latency without correct=true; none below the floor.
//
// A spec with a Workload is evaluated at the workload's positions
// (Workload.Positions: the first, middle and last generated position of
// each prompt length), each lowered with the workload's context
// (ContextConfig: a preset's max_seq grows to it), validated, checked from
// the seeded KV cache (seeded.go: the reference VM and the eager oracle
// start the step from the same cache filled to that position, so a long
// context costs one step; a GPU launcher starts from it too, TimeRequest.KV;
// the step decodes a token whose eager logits have a clear top,
// LoadedModel.checkToken, so that a near tie does not fail a correct
// schedule)
// and timed; the verdict's latency and floor are the workload's weighted
// means and Verdict.Positions keeps each position's figures. StepFloors
// states the floors of a workload's positions for a reader that trusts no
// worker (the fleet's scheduler).
//
// A model named "NAME:SCHEME" (or whose weights file holds int8/int4
// weights) is quantized (docs/spec/quantization.md): seeded weights are
// the float model's, mapped or generated once, quantized in memory; a
// float checkpoint is quantized on load. ModelQuality compares such a model
// with its float twin (the verdict's model_quality, asked for by amkctl
// eval --quality).
//
// Launchers report their failures as values the pipeline maps onto the
// verdict: a *MismatchError (the device's logits disagree with the reference
// VM) makes the verdict correct=false with no latency; a *LaunchError carries
// its class — ClassRejected (the device refused the program before launch)
// makes the verdict valid=false, FailTimeout and FailInfra become failures of
// that class, anything else a crash. Outcomes also carry per-stage wall
// times (Stages) and the cost model's critical-path shares (Regions).
//
// A model's weights are the spec's safetensors file, else the model's own
// checkpoint (model.Checkpoint: a HuggingFace id's snapshot, or the
// directory of its config.json; model.safetensors or every shard of
// model.safetensors.index.json), noted in the verdict (CheckpointNote),
// else seeded weights (WeightSeed). Since those are resolved where the
// trial is evaluated, a campaign's spec names the weights it is for
// (Spec.WeightsID, IdentifyWeights: the seed, or each file's name, size
// and SHA-256, and the HuggingFace revision), and an evaluator that would
// load other weights refuses it (PhaseWeights; weightsid.go).
//
// Models whose weights, at their stored dtype, exceed the host's check budget
// are checked on a truncation to their first layers (every layer lowers the
// same way; real weights are read for those layers only); the verdict says
// so in its notes. With ModelCache.UseWeightsDir, seeded
// weights are generated once per directory (a workspace's weights/) and
// memory-mapped from the stored safetensors file by every later load: the
// weights are views of the mapping, not copies. A ModelCache keeps a model
// while a trial uses it (Evaluate holds it for the trial) and then only while
// the unused models' weights fit its keep budget (KeepUnused, by default its
// check budget), least recently used first out; a model let go is
// unmapped, so a long-running worker cycling through models holds a bounded
// set of mappings. Models handed out by Get stay for the cache's life. A
// model that does not fit the host's memory (WithMemoryProbe) first has the
// unused models released, least recently used first, and is refused only
// when it still does not fit. With WithHostAdmission the check is one for
// the whole host: the evaluators of a machine share one budget, so two of
// them checking at the same moment cannot both admit a model only one
// copy of fits.
package trial
