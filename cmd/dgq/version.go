package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/selftest"
)

func newVersionCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print this build: release, commit, Go toolchain, target and every build setting",
		Long: `version describes this dgq binary from the build information the Go toolchain recorded in it: the
release, the commit built (full and short), whether the tree had uncommitted changes, the commit's time, the Go
version, the target (GOOS/GOARCH), the module and every build setting (-tags, -trimpath, -ldflags, CGO_ENABLED,
GOAMD64/GOARM64, vcs…). A build that recorded no commit (-buildvcs=false, go run, go install of a module version)
says so. --json prints the same as one object.

Exit codes: 0; 2 usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b := selftest.ReadBuild()
			if asJSON {
				return writeJSON(e.stdout, b)
			}
			renderVersion(e.stdout, b)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the build as one JSON object")
	return c
}

// renderVersion prints a build as text, one fact per line.
func renderVersion(w io.Writer, b selftest.Build) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%s\n", b.Version)
	fmt.Fprintf(tw, "commit\t%s\n", commitText(b))
	if b.Commit != "" {
		fmt.Fprintf(tw, "commit short\t%s\n", b.CommitShort)
		fmt.Fprintf(tw, "modified\t%s\n", yesNo(b.Modified, "yes (the tree had uncommitted changes)", "no"))
		fmt.Fprintf(tw, "commit time\t%s\n", orUnknown(b.Time))
	}
	fmt.Fprintf(tw, "go\t%s\n", b.GoVersion)
	fmt.Fprintf(tw, "target\t%s/%s\n", b.GOOS, b.GOARCH)
	if b.ModulePath != "" {
		fmt.Fprintf(tw, "module\t%s %s\n", b.ModulePath, b.Module)
	}
	if b.Path != "" {
		fmt.Fprintf(tw, "package\t%s\n", b.Path)
	}
	for _, s := range b.Settings {
		fmt.Fprintf(tw, "setting\t%s=%s\n", s.Key, s.Value)
	}
	tw.Flush()
}

// commitText is the commit of a build for text: the full revision, or
// "unknown" and why.
func commitText(b selftest.Build) string {
	if b.Commit != "" {
		return b.Commit
	}
	if b.CommitNote != "" {
		return "unknown (" + b.CommitNote + ")"
	}
	return "unknown"
}

// versionLine is dgq --version: the release and the commit's first 12
// characters (the release alone when the build recorded no commit).
func versionLine(b selftest.Build) string {
	if b.CommitShort == "" {
		return b.Version
	}
	return b.Version + " (" + b.CommitShort + ")"
}

// yesNo is yes when v, else no.
func yesNo(v bool, yes, no string) string {
	if v {
		return yes
	}
	return no
}
