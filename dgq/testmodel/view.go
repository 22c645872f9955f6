package testmodel

import (
	"github.com/nlpodyssey/safetensors"

	"github.com/dgq-dev/dgq/codecs"
)

// View is raw tensor bytes as the safetensors library's View, for tests that
// write checkpoints of their own.
type View struct {
	DT    codecs.DType // F16, F32 or BF16 (anything else is written as BF16)
	Dims  []uint64
	Bytes []byte
}

// DType is the safetensors dtype of v.DT.
func (v View) DType() safetensors.DType {
	switch v.DT {
	case codecs.F16:
		return safetensors.F16
	case codecs.F32:
		return safetensors.F32
	}
	return safetensors.BF16
}

func (v View) Shape() []uint64 { return v.Dims }
func (v View) Data() []byte    { return v.Bytes }
func (v View) DataLen() uint64 { return uint64(len(v.Bytes)) }
