package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/calibrate"
)

func newCalibrateCmd(e *env) *cobra.Command {
	var (
		o      calibrate.Options
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "calibrate SOURCE --text FILE -o/--out OUT.imatrix.safetensors [--windows N] [--prompt-len N] [--seed N] [--force] [--json] [--backend cpu|cuda|metal] [--workers N]",
		Short: "Measure an importance matrix of a bf16 model on a text, for quantization",
		Long: `calibrate runs a bf16 model on the real inputs of a text and writes an importance matrix ("imatrix"): for every
quantizable weight, the sum over the token positions that reached it of each input column's square, and how many
positions reached it (per expert for the expert banks; a down projection's input is the expert's intermediate
activation). The inputs are dgq verify's: windows of the tokenized text, a clean prefix of --prompt-len tokens
prefilled, then the next canvas corrupted at each noise rate (0.25, 0.5, 0.75, 1) and denoised without and with
self-conditioning. It prints the file written and each MoE layer's expert coverage; a warning names the layers
with experts no position was routed to (written unweighted: in_sum2 0, counts 0).

SOURCE is a bf16 pack folder, ORG/NAME[@REV] of a cached bf16 pack or snapshot, or a snapshot folder (made into a
temporary bf16 pack first, as dgq verify does). It reads SOURCE and --text and writes OUT only, atomically, at
the end (docs/format.md, "The imatrix file").

Exit codes: 0 the file written; 2 usage (a number out of its bounds, a text shorter than one window, a quantized
source, OUT exists without --force, is not .safetensors, or lies in a missing folder or the Hugging Face cache); 3 not a pack, a --text
that does not exist or is not UTF-8; 4 the source is not in the hub cache; 5 I/O; 6 the backend cannot run here;
130 interrupted (143 by SIGTERM).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkBackend(o.Load.Backend, o.Load.Precision); err != nil {
				return err
			}
			o.Source = args[0]
			o.Progress, o.Steps, o.Notify = newProgress(e), newCountProgress(e), notifier(e)
			o.Load.Note = onceNotifier(e)
			r, err := calibrate.Run(e.ctx, o)
			if err != nil {
				return err
			}
			for _, w := range r.Warnings {
				fmt.Fprintln(e.stderr, "warning: "+oneLine(w))
			}
			if asJSON {
				return writeJSON(e.stdout, r)
			}
			renderCalibrate(e.stdout, r)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Text, "text", "", "UTF-8 calibration text (required)")
	f.StringVarP(&o.Out, "out", "o", "", "the imatrix file to write (OUT.imatrix.safetensors)")
	f.IntVar(&o.Windows, "windows", calibrate.DefaultWindows, "windows of the text run (fewer when the text holds fewer)")
	f.IntVar(&o.PromptLen, "prompt-len", calibrate.DefaultPromptLen, "tokens prefilled before each canvas (bos included)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the canvases' corruption")
	f.BoolVar(&o.Force, "force", false, "overwrite OUT")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	backendFlags(c, &o.Load)
	f.IntVar(&o.Load.Workers, "workers", 0, "forward-pass goroutines of the cpu backend (0 = all cores)")
	f.BoolVar(&o.Load.SkipDigests, "skip-digests", false, "trust the pack's digests instead of verifying them at load")
	f.StringVar(&o.Tmp, "tmp", "", "folder for a snapshot source's temporary bf16 pack (default $TMPDIR)")
	return c
}

// renderCalibrate prints the file written, what was run and the expert
// coverage per MoE layer.
func renderCalibrate(w io.Writer, r *calibrate.Result) {
	fmt.Fprintf(w, "source %s (%s), backend %s\n", r.Source, r.SourceKind, r.Backend)
	fmt.Fprintf(w, "%d windows (prompt-len %d, canvas %d), %d positions, %d tensors, %.1f s\n",
		r.Windows, r.PromptLen, r.Canvas, r.Positions, r.Tensors, r.Elapsed)
	if len(r.Coverage) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "layer\texperts reached\tof\tmin count\t")
		for _, c := range r.Coverage {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t\n", c.Layer, c.ExpertsReached, c.Experts, c.MinCount)
		}
		tw.Flush()
	}
	if len(r.Unreached) > 0 {
		names := r.Unreached
		if len(names) > 3 {
			names = append(names[:3:3], fmt.Sprintf("and %d more (--json lists them)", len(r.Unreached)-3))
		}
		fmt.Fprintf(w, "%d tensors unreached (written unweighted): %s\n", len(r.Unreached), strings.Join(names, ", "))
	}
	fmt.Fprintln(w, r.Path) // the last line: the file written
}
