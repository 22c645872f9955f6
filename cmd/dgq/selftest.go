package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/selftest"
)

// maxFailureLines is how many failure lines the text report prints per part
// (--json has them all).
const maxFailureLines = 8

func newSelftestCmd(e *env) *cobra.Command {
	var (
		o      selftest.Options
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "selftest [--backend cpu|cuda|metal] [--precision f32|bf16] [--quick] [--json]",
		Short: "Prove a backend on this machine: conformance, kernels, arithmetic, parity and a generation beside the CPU",
		Long: `selftest proves a backend on this machine with nothing but this binary. It runs the backend
conformance suite (every op against the CPU reference, within bounds derived from what the backend's vendor
documents of its arithmetic), compiles every kernel the backend may launch and reports each with its compiler's
log and limits, probes the f32 arithmetic the bit-exact ops rely on, runs the embedded tiny checkpoint's
transformers scenarios on the backend (against the reference and the CPU backend) and seeded generations in
lockstep with the CPU backend with every difference explained, and describes the machine (OS, CPU, memory,
GPU, driver) and this dgq build. --quick runs a subset that takes under a minute on a GPU. --json prints the
report to send back with an issue.

Exit codes: 0 every part passed; 1 a part failed or gave no verdict; 2 usage (an unknown backend, a precision it lacks); 6 the
backend cannot run here (the reason is printed; --json still prints the environment).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkBackend(o.Backend, o.Precision); err != nil {
				return err
			}
			if !asJSON {
				o.Progress = newCountProgress(e)
			}
			r, err := selftest.Run(e.ctx, o)
			if r == nil {
				return err
			}
			if asJSON {
				if werr := writeJSON(e.stdout, r); werr != nil {
					return werr
				}
			} else {
				renderSelftest(e.stdout, r)
			}
			if err != nil {
				if asJSON { // the report is the JSON document: the message goes to stderr alone
					fmt.Fprintln(e.stderr, "dgq: "+oneLine(err.Error()))
					return &codedError{err: err, code: exitCode(err), silent: true}
				}
				return err
			}
			if !r.Pass {
				failed, unjudged := 0, 0
				for _, p := range r.Parts {
					switch {
					case !p.Judged():
						unjudged++
					case !p.Pass:
						failed++
					}
				}
				err := fmt.Errorf("selftest of backend %s failed: %d of %d parts", r.Backend.Name, failed, len(r.Parts))
				if failed == 0 {
					err = fmt.Errorf("selftest of backend %s gave no verdict: %d of %d parts could not judge (the report says why)", r.Backend.Name, unjudged, len(r.Parts))
				}
				return &codedError{err: err, code: exitFailure, silent: asJSON}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Backend, "backend", "cpu", "backend to prove: "+strings.Join(backend.Names(), ", "))
	f.StringVar(&o.Precision, "precision", "f32", "its matrix-product arithmetic: f32 or bf16 (GPU backends)")
	f.BoolVar(&o.Quick, "quick", false, "a subset that takes under a minute on a GPU (the suite's small shapes, one pack, one generation)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (the file to send back with an issue)")
	f.IntVar(&o.Workers, "workers", 0, "goroutines of the cpu backend (0 = all cores)")
	return c
}

// renderSelftest prints a self-test report as text.
func renderSelftest(w io.Writer, r *selftest.Report) {
	env := r.Environment
	fmt.Fprintf(w, "machine  %s %s (%s), %s, %d CPUs, %.1f GB\n", env.OS, env.Arch, strings.TrimSpace(env.OSVersion+" "+env.Kernel),
		orUnknown(env.CPU), env.CPUs, float64(env.MemoryBytes)/1e9)
	for _, g := range env.GPUs {
		fmt.Fprintf(w, "gpu      %s, %s cores, %s\n", g.Model, orUnknown(g.Cores), orUnknown(g.Metal))
	}
	commit := orUnknown(r.Build.Commit)
	if r.Build.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(w, "dgq      %s, commit %s, %s\n", r.Build.Version, commit, r.Build.GoVersion)
	b := r.Backend
	if !b.Available {
		fmt.Fprintf(w, "backend  %s (%s): unavailable: %s\n", b.Name, b.Precision, b.Reason)
		return
	}
	if d := b.Device; d != nil {
		fmt.Fprintf(w, "backend  %s (%s) on %s", b.Name, b.Precision, d.Name)
		if d.Family != "" {
			fmt.Fprintf(w, ", %s", d.Family)
		}
		if d.Driver != "" {
			fmt.Fprintf(w, ", driver %s", d.Driver)
		}
		if d.Compiler != "" {
			fmt.Fprintf(w, "; %s", d.Compiler)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "backend  %s (%s)\n", b.Name, b.Precision)
	}
	if n := b.Numerics; n != nil {
		fmt.Fprintf(w, "numerics subnormals flushed: %v; exp %g, log %g, tanh %g, sin/cos %g/%g ulp (%s)\n", n.FlushSubnormals,
			n.ULP.Exp, n.ULP.Log, n.ULP.Tanh, n.ULP.Sin, n.ULP.Cos, n.Source)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "part\tresult\ttime\t")
	for _, p := range r.Parts {
		fmt.Fprintf(tw, "%s\t%s\t%.1f s\t%s\n", p.Name, verdictMark(p.Pass, p.Judged()), p.ElapsedSeconds, p.Summary)
	}
	tw.Flush()
	for _, p := range r.Parts {
		for i, f := range p.Failures {
			if i == maxFailureLines {
				fmt.Fprintf(w, "  %s: %d more (--json lists them)\n", p.Name, len(p.Failures)-maxFailureLines)
				break
			}
			fmt.Fprintf(w, "  %s: %s\n", p.Name, f)
		}
	}
	fmt.Fprintf(w, "selftest: %s in %.1f s\n", verdictWord(r.Pass, r.Judged()), r.ElapsedSeconds)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
