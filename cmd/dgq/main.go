// Command dgq quantizes DiffusionGemma Hugging Face checkpoints into .dgq
// packs, inspects and audits packs. Run `dgq --help` for the commands.
package main

import (
	"context"
	"os"

	_ "github.com/dgq-dev/dgq/cuda"  // registers --backend cuda
	_ "github.com/dgq-dev/dgq/metal" // registers --backend metal
)

func main() {
	ctx, stop := interruptContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
