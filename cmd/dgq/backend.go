package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgq-dev/dgq/runtime/backend"
	"github.com/dgq-dev/dgq/runtime/session"
)

// The flags of the commands that run a pack on a backend (parity, run, bench).

// checkBackend refuses backends this build does not have and precisions
// no backend has, before anything is loaded.
func checkBackend(b, precision string) error {
	if !slices.Contains(backend.Names(), b) {
		return usageErr(fmt.Errorf("--backend %s is not built in (valid: %s)", b, strings.Join(backend.Names(), ", ")))
	}
	switch {
	case precision != "f32" && precision != "bf16":
		return usageErr(fmt.Errorf("--precision %s is not one of f32, bf16", precision))
	case b == "cpu" && precision != "f32":
		return usageErr(fmt.Errorf("--precision %s needs a GPU backend (--backend cuda); the cpu backend computes in f32", precision))
	}
	return nil
}

// backendFlags adds --backend, --precision and --max-memory to a command
// that runs a pack.
func backendFlags(c *cobra.Command, lo *session.Options) {
	c.Flags().StringVar(&lo.Backend, "backend", "cpu", "compute backend: "+strings.Join(backend.Names(), ", "))
	c.Flags().StringVar(&lo.Precision, "precision", "f32", "matrix-product arithmetic of a GPU backend: f32 (exact) or bf16 (tensor cores, fast)")
	c.Flags().Var(&lo.MaxMemory, "max-memory", "refuse the run when its memory estimate exceeds this (64GB, 48GiB, bytes; default: what the backend has)")
}
