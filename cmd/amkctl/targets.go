package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
)

func init() { addVerb(groupGPU, newTargetsCmd) }

func newTargetsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "targets",
		Short: "list the GPU target records and model presets",
		Args:  cobra.NoArgs,
	}
	cmd.RunE = runVerb(func(_ []string, stdout, _ io.Writer) int {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TARGET\tVENDOR\tARCH\tSMS/CUS\tWAVE\tSMEM/LDS KB\tHBM GB/s\tMEASURED GB/s\tFP16/FP8 TFLOPS\tNOTE")
		for _, name := range ir.TargetNames() {
			t, _ := ir.Target(name)
			arch := "-"
			if t.IsCUDA() {
				arch = fmt.Sprintf("sm_%d", t.SMArch)
			}
			meas := "-"
			if t.MeasuredBWGBs > 0 {
				meas = fmt.Sprint(t.MeasuredBWGBs)
			}
			fp8 := "-"
			if v := t.MatrixPeakTFLOPS("fp8"); v > 0 {
				fp8 = fmt.Sprint(v)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%g\t%s\t%g/%s\t%s\n", t.Name, t.VendorName(), arch, t.NumSMs,
				t.Wavefront(), t.SmemBytesPerSM/1024, t.HBMBandwidthGBs, meas, t.MatrixPeakTFLOPS("fp16"), fp8, t.Note)
		}
		tw.Flush()
		fmt.Fprintln(stdout)
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tLAYERS\tHIDDEN\tHEADS/KV\tDTYPE\tWEIGHT MB")
		for _, name := range model.PresetNames() {
			c, err := model.Preset(name)
			if err != nil {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d/%d\t%s\t%.1f\n", name, c.NLayers, c.Hidden, c.NHeads, c.NKVHeads, c.DType, float64(c.WeightBytes())/1e6)
		}
		tw.Flush()
		return exitOK
	})
	return cmd
}
