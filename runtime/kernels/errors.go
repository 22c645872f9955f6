package kernels

import "errors"

// ErrUnknownFile is wrapped by the error for a kernel file the package does
// not hold.
var ErrUnknownFile = errors.New("kernels: unknown kernel file")

// ErrUnknownDialect is wrapped by the error for a Dialect value that is not
// one of the package's constants.
var ErrUnknownDialect = errors.New("kernels: unknown dialect")
