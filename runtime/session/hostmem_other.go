//go:build !linux && !darwin

package session

// HostMemory cannot be told here: the estimate is not checked against it.
func HostMemory() (total, available uint64) { return 0, 0 }
