package cuda

import (
	_ "embed"
	"fmt"
	"sync"
)

// moeMMASource is the CUDA-specific source of the fast kernels (q4 grouped
// GEMMs on the tensor cores, bf16 packing).
//
//go:embed kernels/moe_mma.cu
var moeMMASource string

// moeState is a backend's MoE and fast-matmul state: grow-only named scratch
// buffers and the compiled moe_mma.cu module. It lives in a registry keyed by
// the backend (the backend struct is not this file's); closeMoE frees it.
type moeState struct {
	bufs  map[string]*Buffer
	mod   *Module
	tiled *Module // moe_tiled.cu
}

var moeStates sync.Map // *backend → *moeState

func (c *backend) moeState() *moeState {
	if s, ok := moeStates.Load(c); ok {
		return s.(*moeState)
	}
	s, _ := moeStates.LoadOrStore(c, &moeState{bufs: map[string]*Buffer{}})
	return s.(*moeState)
}

// closeMoE frees the backend's MoE scratch and module (Close should call it).
func (c *backend) closeMoE() error {
	v, ok := moeStates.LoadAndDelete(c)
	if !ok {
		return nil
	}
	s := v.(*moeState)
	var first error
	for k, b := range s.bufs {
		if err := b.Free(); err != nil && first == nil {
			first = err
		}
		delete(s.bufs, k)
	}
	for _, m := range []**Module{&s.mod, &s.tiled} {
		if *m != nil {
			if err := (*m).Close(); err != nil && first == nil {
				first = err
			}
			*m = nil
		}
	}
	return first
}

// scratch returns the device address of the named scratch buffer, grown to
// at least n bytes (a grown buffer replaces the old one after the queued
// work: Free waits for the stream).
func (s *moeState) scratch(d *Device, name string, n int64) (Ptr, error) {
	n = max(n, 16)
	if b := s.bufs[name]; b != nil {
		if b.Size() >= n {
			return b.Ptr(), nil
		}
		if err := b.Free(); err != nil {
			return 0, err
		}
		delete(s.bufs, name)
	}
	// Round up to 1 MiB past 1 MiB so that slowly growing shapes do not
	// reallocate every call.
	if n > 1<<20 {
		n = (n + 1<<20 - 1) &^ (1<<20 - 1)
	}
	b, err := d.Alloc(n)
	if err != nil {
		return 0, fmt.Errorf("cuda: MoE scratch %s of %d bytes: %w", name, n, err)
	}
	s.bufs[name] = b
	return b.Ptr(), nil
}

// module returns moe_mma.cu compiled for the device.
func (s *moeState) module(d *Device) (*Module, error) {
	if s.mod != nil {
		return s.mod, nil
	}
	m, err := d.Compile("moe_mma.cu", moeMMASource)
	if err != nil {
		return nil, err
	}
	s.mod = m
	return m, nil
}

// fastMMA reports whether the device runs the moe_mma.cu kernels (bf16
// mma.sync, cvt.rn.bf16x2: sm_80 or later).
func (c *backend) fastMMA() bool {
	major, _ := c.d.Capability()
	return major >= 8
}
