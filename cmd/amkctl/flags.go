package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/amk-dev/amk/atomicfile"
	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/trial"
)

// The flags several verbs share, spelled and explained the same way in each.

// addJSONFlags adds --json and --output json|text, two spellings of one
// setting, and returns it (true: print JSON).
func addJSONFlags(cmd *cobra.Command, usage string) *bool {
	jsonOut := new(bool)
	fs := cmd.Flags()
	fs.BoolVar(jsonOut, "json", false, usage)
	fs.Var(outputFormat{jsonOut}, "output", "output format: json or text (--output json is --json)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "text"}, cobra.ShellCompDirectiveNoFileComp))
	return jsonOut
}

// outputFormat is the --output flag, stored in the --json flag's variable.
type outputFormat struct{ json *bool }

func (o outputFormat) String() string {
	if o.json != nil && *o.json {
		return "json"
	}
	return "text"
}

func (o outputFormat) Set(s string) error {
	switch s {
	case "json":
		*o.json = true
	case "text":
		*o.json = false
	default:
		return fmt.Errorf("must be json or text, got %q", s)
	}
	return nil
}

func (o outputFormat) Type() string { return "json|text" }

// addGPUFlag adds --gpu, the GPU target record, completed from the records.
func addGPUFlag(cmd *cobra.Command, def, usage string) *string {
	if usage == "" {
		usage = "GPU target record (amkctl targets lists them)"
	}
	gpu := cmd.Flags().String("gpu", def, usage)
	_ = cmd.RegisterFlagCompletionFunc("gpu", cobra.FixedCompletions(ir.TargetNames(), cobra.ShellCompDirectiveNoFileComp))
	return gpu
}

// addDeviceFlag adds --device: cpu (the cost model, latencies labelled
// predicted), emu (the CUDA kernels checked on the CPU emulator, latencies
// predicted), cuda (measured on the GPU) or, where the verb opens the device
// (launcherFor), auto.
func addDeviceFlag(cmd *cobra.Command, usage string) *string {
	if usage == "" {
		usage = "cpu (cost-model latencies, labelled predicted), emu (the CUDA kernels checked on the CPU emulator; latencies predicted), cuda (measured on the GPU), or auto (cuda when a CUDA device answers, cpu otherwise; says which)"
	}
	device := cmd.Flags().String("device", "cpu", usage)
	_ = cmd.RegisterFlagCompletionFunc("device", cobra.FixedCompletions([]string{"cpu", "emu", "cuda"}, cobra.ShellCompDirectiveNoFileComp))
	return device
}

// addScheduleFlag adds --schedule, the schedule config JSON file ("-" for
// standard input), with --config, its old name, as an alias.
func addScheduleFlag(cmd *cobra.Command, usage string) *string {
	path := new(string)
	cmd.Flags().Var(scheduleFlag{path}, "schedule", usage+" (--config is the old name)")
	flagAliases(cmd.Flags(), map[string]string{"config": "schedule"})
	return path
}

// scheduleFlag is the --schedule flag: a path given empty (an unset shell
// variable, say) is refused rather than taken as "no config", which would
// evaluate the default config in its place.
type scheduleFlag struct{ path *string }

func (p scheduleFlag) String() string {
	if p.path == nil {
		return ""
	}
	return *p.path
}

func (p scheduleFlag) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("--schedule is empty: name a schedule config file (- for standard input), or leave the flag out for the default config")
	}
	*p.path = s
	return nil
}

func (p scheduleFlag) Type() string { return "string" }

// flagAliases makes each old flag name an alias of its new one: the old name
// keeps working on the command line and only the new one is listed in -h.
func flagAliases(fs *pflag.FlagSet, aliases map[string]string) {
	prev := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(f *pflag.FlagSet, name string) pflag.NormalizedName {
		if to, ok := aliases[name]; ok {
			name = to
		}
		return prev(f, name)
	})
}

// completeModels completes a MODEL argument with the model presets.
func completeModels(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return model.PresetNames(), cobra.ShellCompDirectiveDefault
}

// writeFileAtomic writes data to path through a temporary file and a rename,
// so a crash never leaves a half-written file.
func writeFileAtomic(path string, data []byte) error { return atomicfile.Write(path, data) }

// splitIDs parses "1,2,3" into token ids.
func splitIDs(s string) ([]int32, error) {
	var out []int32
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var v int32
		if _, err := fmt.Sscan(f, &v); err != nil || v < 0 {
			return nil, fmt.Errorf("invalid token id %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// workloadFlags are --prompt-len, --gen-len and --workload: what a campaign
// or an eval tunes for (trial.Workload).
type workloadFlags struct {
	cmd    *cobra.Command
	prompt *string
	gen    *int
	file   *string
}

// addWorkloadFlags adds the workload flags; what evaluates one decode step
// when none is given says so in more.
func addWorkloadFlags(cmd *cobra.Command, more string) workloadFlags {
	fs := cmd.Flags()
	return workloadFlags{cmd: cmd,
		prompt: fs.String("prompt-len", "", fmt.Sprintf("prompt length(s) of the workload, comma-separated (default %d)%s", trial.DefaultPromptLen, more)),
		gen:    fs.Int("gen-len", trial.DefaultGenLen, "tokens generated after each prompt: the workload's decode steps"),
		file:   fs.String("workload", "", "a workload file: {\"prompt_lens\": [...] or \"prompt_len\": N, \"gen_len\": N, \"batch\": B}"),
	}
}

// given reports whether any workload flag was given.
func (f workloadFlags) given() bool {
	fs := f.cmd.Flags()
	return fs.Changed("prompt-len") || fs.Changed("gen-len") || fs.Changed("workload")
}

// resolve is the workload the flags give, with batch (nil when no workload
// flag was given): the file's, or the default's prompt and generation
// lengths replaced by the flags given.
func (f workloadFlags) resolve(batch int) (*trial.Workload, error) {
	if !f.given() {
		return nil, nil
	}
	w := trial.DefaultWorkload()
	if *f.file != "" {
		if f.cmd.Flags().Changed("prompt-len") || f.cmd.Flags().Changed("gen-len") {
			return nil, fmt.Errorf("--workload and --prompt-len/--gen-len: give one or the other")
		}
		data, err := inputfile.Read(*f.file, trial.MaxWorkloadFileBytes)
		if err != nil {
			return nil, err
		}
		if w, err = trial.ReadWorkload(strings.NewReader(string(data))); err != nil {
			return nil, err
		}
		if f.cmd.Flags().Changed("batch") {
			if w, err = w.WithBatch(batch); err != nil {
				return nil, fmt.Errorf("--batch and the workload file: %w", err)
			}
		}
		return &w, nil
	}
	if *f.prompt != "" {
		w.PromptLens = nil
		for s := range strings.SplitSeq(*f.prompt, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("--prompt-len %q: %q is not a whole number", *f.prompt, s)
			}
			w.PromptLens = append(w.PromptLens, n)
		}
	}
	w.GenLen, w.Batch = *f.gen, batch
	return &w, w.Check()
}

// campaignWorkloadFlags are the campaign settings autoresearch and start
// share: the workload (--batch and the workload flags) and
// --speedup-target. They go into control.CreateRequest as given, which
// checks them as it checks every front's.
type campaignWorkloadFlags struct {
	cmd      *cobra.Command
	batch    *int
	workload workloadFlags
	speedup  *float64
}

// addCampaignWorkloadFlags adds the flags of campaignWorkloadFlags.
func addCampaignWorkloadFlags(cmd *cobra.Command) campaignWorkloadFlags {
	fs := cmd.Flags()
	return campaignWorkloadFlags{cmd: cmd,
		batch:    fs.Int("batch", 1, "decode batch B every trial lowers and checks (B > 1: GEMM tiles); the workload's batch"),
		workload: addWorkloadFlags(cmd, "; a workload other than the default names its own campaign"),
		speedup:  fs.Float64("speedup-target", campaign.DefaultMoveOn().SpeedupTarget, "a new campaign stops once this fast against its baseline (0: never)"),
	}
}

// apply sets the request's workload, batch and speedup target from the
// flags given (those not given leave the request's defaults).
func (f campaignWorkloadFlags) apply(req *control.CreateRequest) error {
	fs := f.cmd.Flags()
	if *f.batch < 1 {
		return fmt.Errorf("--batch must be >= 1, got %d", *f.batch)
	}
	if fs.Changed("batch") {
		req.Batch = f.batch
	}
	w, err := f.workload.resolve(*f.batch)
	if err != nil {
		return err
	}
	req.Workload = w
	if fs.Changed("speedup-target") {
		if req.MoveOn == nil {
			req.MoveOn = &control.MoveOn{}
		}
		req.MoveOn.SpeedupTarget = f.speedup
	}
	return nil
}

// addQuantizeFlag adds --quantize, the weight quantization of MODEL
// (model.ParseQuantization: w8a16, w4a16, w4a16-g64, ...).
func addQuantizeFlag(cmd *cobra.Command) *string {
	q := cmd.Flags().String("quantize", "", "quantise MODEL's projection weights: w8a16 (int8, a scale per output channel) or "+
		"w4a16 (int4, groups of 128; -g32/-g64 for smaller groups; -fphead keeps the lm_head bf16); the same as MODEL:SCHEME")
	_ = cmd.RegisterFlagCompletionFunc("quantize", cobra.FixedCompletions([]string{"w8a16", "w4a16", "w4a16-g64", "w4a16-g32"}, cobra.ShellCompDirectiveNoFileComp))
	return q
}

// quantizedModel is the model argument with --quantize applied
// ("small" + "w8a16" -> "small:w8a16"); a MODEL that already names another
// scheme is refused.
func quantizedModel(arg, quantize string) (string, error) {
	q, err := model.ParseQuantization(quantize)
	if err != nil {
		return "", fmt.Errorf("--quantize: %w", err)
	}
	name, has, err := model.SplitModelSpec(arg)
	if err != nil {
		return "", err
	}
	switch {
	case !q.On():
		return arg, nil
	case has.On() && has != q:
		return "", fmt.Errorf("MODEL %q names %s, --quantize %s", arg, has, q)
	}
	return model.ModelSpec(name, q), nil
}
