// Command dgq is the DiffusionGemma pack toolchain: it fetches checkpoints
// and packs (download), turns a Hugging Face checkpoint into a .dgq pack
// (quantize, with an importance matrix from calibrate), reads, checks and
// re-lays packs (inspect, audit, repack, card), runs them (run, tokenize,
// bench, smoke) and proves them (parity against transformers, verify against
// the bf16 source, selftest of a backend, doctor of the machine); demo, synth
// and version round it off. Every command calls one library function; `dgq
// --help` maps them by task.
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
