package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/amk-dev/amk/atomicfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
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
// predicted), cuda (measured on the GPU) or, where the verb opens the device
// (launcherFor), auto.
func addDeviceFlag(cmd *cobra.Command, usage string) *string {
	if usage == "" {
		usage = "cpu (cost-model latencies, labelled predicted), cuda (measured on the GPU), or auto (cuda when a CUDA device answers, cpu otherwise; says which)"
	}
	device := cmd.Flags().String("device", "cpu", usage)
	_ = cmd.RegisterFlagCompletionFunc("device", cobra.FixedCompletions([]string{"cpu", "cuda"}, cobra.ShellCompDirectiveNoFileComp))
	return device
}

// addScheduleFlag adds --schedule, the schedule config JSON file ("-" for
// standard input), with --config, its old name, as an alias.
func addScheduleFlag(cmd *cobra.Command, usage string) *string {
	path := cmd.Flags().String("schedule", "", usage+" (--config is the old name)")
	flagAliases(cmd.Flags(), map[string]string{"config": "schedule"})
	return path
}

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
