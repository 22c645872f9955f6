package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// One vocabulary: an idea has one flag name across every command
// (docs/cli.md, "Flag vocabulary"). A flag that was renamed keeps its old
// name for one release as a hidden alias: it sets the same variable, is not
// listed in --help, and using it prints a one-line note on stderr.

// renamedFlag registers old as a hidden alias of the flag current that c
// already has (none when c has no such flag: TestRenamedFlags catches it).
func renamedFlag(e *env, c *cobra.Command, old, current string) {
	f := c.Flags().Lookup(current)
	if f == nil {
		return
	}
	c.Flags().AddFlag(&pflag.Flag{
		Name:        old,
		Usage:       "deprecated: use --" + current,
		Value:       &aliasValue{Value: f.Value, e: e, old: old, current: current},
		DefValue:    f.DefValue,
		NoOptDefVal: f.NoOptDefVal,
		Hidden:      true,
	})
}

// aliasValue is the Value of a renamed flag's old name: the new flag's
// Value, with a deprecation note printed when it is set.
type aliasValue struct {
	pflag.Value
	e            *env
	old, current string
}

func (v *aliasValue) Set(s string) error {
	if v.e != nil && v.e.stderr != nil {
		fmt.Fprintf(v.e.stderr, "dgq: note: --%s is deprecated and will be removed in the next release; use --%s\n", v.old, v.current)
	}
	return v.Value.Set(s)
}
