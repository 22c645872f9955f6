package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/selftest"
)

// env is what every command needs besides its flags.
type env struct {
	ctx            context.Context
	stdout, stderr io.Writer
	// interactive: stderr is a terminal, so progress bars are drawn.
	interactive bool
}

// run executes the command line and returns the process exit code. Tests
// call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, interactive: isTerminal(stderr)}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ce *codedError
	if errors.As(err, &ce) && ce.silent {
		return ce.code
	}
	code := exitCode(err)
	if isCobraUsage(err) {
		code = exitUsage
	}
	msg := "dgq: " + oneLine(strings.TrimPrefix(err.Error(), "dgq: "))
	fmt.Fprintln(stderr, msg)
	if wantsJSON(args) {
		writeJSON(stdout, jsonError{Error: jsonErrorBody{Code: code, Kind: exitKinds[code], Message: msg}})
	}
	return code
}

// jsonError is what a command run with --json prints on stdout when it fails
// (the one-line message still goes to stderr).
type jsonError struct {
	Error jsonErrorBody `json:"error"`
}

type jsonErrorBody struct {
	Code    int    `json:"code"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// wantsJSON reports whether --json was given, looked up in the raw
// arguments so that even a command line cobra cannot parse gets a JSON error.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// cobraUsagePrefixes are the messages cobra gives for command lines it
// cannot parse; it has no typed errors for them.
var cobraUsagePrefixes = []string{"unknown command", "required flag", "unknown flag", "unknown shorthand", "flag needs an argument", "invalid argument"}

func isCobraUsage(err error) bool {
	for _, p := range cobraUsagePrefixes {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "dgq",
		Short: "Quantize DiffusionGemma checkpoints into .dgq packs, inspect and audit them",
		Long: `dgq streams a Hugging Face DiffusionGemma snapshot into a quantized .dgq pack in one pass,
and inspects and audits packs. Every bad input is refused with a one-line error naming the problem.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr(fmt.Errorf("%w (see dgq %s --help)", err, c.Name()))
	})
	root.AddCommand(newQuantizeCmd(e), newDownloadCmd(e), newInspectCmd(e), newAuditCmd(e), newRepackCmd(e), newDemoCmd(e), newSynthCmd(e),
		newParityCmd(e), newRunCmd(e), newTokenizeCmd(e), newSmokeCmd(e), newBenchCmd(e), newVerifyCmd(e), newSelftestCmd(e), newDoctorCmd(e), newVersionCmd(e), newCardCmd(e))
	for _, c := range root.Commands() {
		c.Args = wrapArgs(c.Args)
	}
	return root
}

// wrapArgs turns cobra's positional-argument errors into usage errors.
func wrapArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	if check == nil {
		return nil
	}
	return func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return usageErr(fmt.Errorf("%s: %w (see dgq %s --help)", c.Name(), err, c.Name()))
		}
		return nil
	}
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// versionString is dgq --version: the release and the VCS revision built
// (versionLine; dgq version prints the whole build).
func versionString() string { return versionLine(selftest.ReadBuild()) }
