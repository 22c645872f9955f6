package overlay

import "errors"

// ErrRepack: a repack cannot be done as asked (wrong kind of input pack,
// no base snapshot to reference).
var ErrRepack = errors.New("overlay: cannot repack")
