package overlay

import (
	"errors"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// ErrRepack: a repack cannot be done as asked (wrong kind of input pack).
var ErrRepack = errors.New("overlay: cannot repack")

// ErrBase: repack --overlay has no base snapshot to reference (the pack
// records none and the flags do not name one completely), or the base named
// is not the pack's model: another config, a tensor of another shape or
// dtype, or no tensor of the pack at all. The message names the first
// mismatch or the missing flag.
var ErrBase = errclass.New(errclass.Usage, "overlay: unusable base snapshot")
