package kernels

import "errors"

// ErrUnknownFile is wrapped by the error for a kernel file the package does
// not hold.
var ErrUnknownFile = errors.New("kernels: unknown kernel file")

// ErrUnknownDialect is wrapped by the error for a Dialect value that is not
// one of the package's constants.
var ErrUnknownDialect = errors.New("kernels: unknown dialect")

// ErrSignature is wrapped by the error for a kernel declaration
// (KERNEL(...)) that breaks the dialect's rules (ParseSignatures).
var ErrSignature = errors.New("kernels: bad kernel signature")

// ErrNoDecoder is wrapped by the error for a stored format that has no
// decoder in the common include, hence no resident layout (ResidentLayout).
var ErrNoDecoder = errors.New("kernels: no device decoder for the format")
