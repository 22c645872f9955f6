package kernels

import "errors"

// ErrUnknownFile is wrapped by the error for a kernel file the package does
// not hold.
var ErrUnknownFile = errors.New("kernels: unknown kernel file")
