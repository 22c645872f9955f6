//go:build !linux && !darwin

package session

// hostMemory cannot be told here: the estimate is not checked against it.
func hostMemory() (total, available uint64) { return 0, 0 }
