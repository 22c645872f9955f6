package model

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// Engine runs a bound Model's forward pass (MODEL_SPEC §3) and the
// sampler's per-position statistics on a backend: the one orchestration of
// the model, whatever the hardware. Every weight is resident on the
// backend (uploaded once, in its stored format), activations and the KV
// cache live in backend buffers, and only the token ids of a step go up and
// per-position statistics come back (no host round trip inside a step).
//
// The arithmetic is the backend's ops (backend.Backend documents their
// tolerances); on package cpu's backend it is the float64-accumulating
// reference that matches transformers to float32 precision.
//
// An Engine is not safe for concurrent use. Close frees what it uploaded;
// the Model (and the pack it reads) must stay open while the Engine is in
// use for host-memory backends (Caps.Host).
type Engine struct {
	m *Model
	b backend.Backend

	mats  map[string]backend.Weight
	vecs  map[*float32]backend.Buf
	owned []interface{ Free() error }

	embed, encEmbed, lmHead backend.Weight
	norm, encNorm           backend.Buf
	scPreNorm               backend.Buf
	scGate, scUp, scDown    backend.Weight
	dec, enc                []engLayer
	s                       arena
}

// engLayer is one layer's resident weights.
type engLayer struct {
	l                                    *layer
	inNorm, postAttnNorm                 backend.Buf
	preFFNorm, postFFNorm                backend.Buf
	postFFNorm1, preFFNorm2, postFFNorm2 backend.Buf
	q, k, v, o                           backend.Weight // v nil: K=V
	qNorm, kNorm                         backend.Buf
	invFreq                              backend.Buf
	gate, up, down                       backend.Weight
	moe                                  backend.MoEWeights
}

// NewEngine uploads m's weights to b. On error everything uploaded so far
// is freed.
func NewEngine(m *Model, b backend.Backend) (_ *Engine, err error) {
	e := &Engine{m: m, b: b, s: arena{b: b}, mats: map[string]backend.Weight{}, vecs: map[*float32]backend.Buf{}}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.embed, err = e.weight(m.embed); err != nil {
		return nil, err
	}
	if e.encEmbed, err = e.weight(m.encEmbed); err != nil {
		return nil, err
	}
	if e.lmHead, err = e.weight(m.lmHead); err != nil {
		return nil, err
	}
	for _, v := range []struct {
		dst *backend.Buf
		src []float32
	}{{&e.norm, m.norm}, {&e.encNorm, m.encNorm}, {&e.scPreNorm, m.scPreNorm}} {
		if *v.dst, err = e.vector(v.src); err != nil {
			return nil, err
		}
	}
	for _, w := range []struct {
		dst *backend.Weight
		src *tensor
	}{{&e.scGate, m.scGate}, {&e.scUp, m.scUp}, {&e.scDown, m.scDown}} {
		if *w.dst, err = e.weight(w.src); err != nil {
			return nil, err
		}
	}
	for _, set := range []struct {
		src []*layer
		dst *[]engLayer
	}{{m.dec, &e.dec}, {m.enc, &e.enc}} {
		for i, l := range set.src {
			el, err := e.layer(l)
			if err != nil {
				return nil, fmt.Errorf("model: engine: layer %d: %w", i, err)
			}
			*set.dst = append(*set.dst, el)
		}
	}
	return e, nil
}

// Backend is the engine's backend.
func (e *Engine) Backend() backend.Backend { return e.b }

// Model is the bound model the engine runs.
func (e *Engine) Model() *Model { return e.m }

func (e *Engine) layer(l *layer) (engLayer, error) {
	el := engLayer{l: l}
	var err error
	for _, v := range []struct {
		dst *backend.Buf
		src []float32
	}{
		{&el.inNorm, l.inNorm}, {&el.postAttnNorm, l.postAttnNorm}, {&el.preFFNorm, l.preFFNorm},
		{&el.postFFNorm, l.postFFNorm}, {&el.postFFNorm1, l.postFFNorm1}, {&el.preFFNorm2, l.preFFNorm2},
		{&el.postFFNorm2, l.postFFNorm2}, {&el.qNorm, l.qNorm}, {&el.kNorm, l.kNorm},
		{&el.moe.RouterScale, l.routerScale}, {&el.moe.PerExpertScale, l.perExpertScale},
		{&el.invFreq, l.invFreq},
	} {
		if *v.dst, err = e.vector(v.src); err != nil {
			return el, err
		}
	}
	for _, w := range []struct {
		dst *backend.Weight
		src *tensor
	}{
		{&el.q, l.q}, {&el.k, l.k}, {&el.v, l.v}, {&el.o, l.o}, {&el.gate, l.gate}, {&el.up, l.up},
		{&el.down, l.down}, {&el.moe.Router, l.router}, {&el.moe.GateUp, l.gateUp}, {&el.moe.Down, l.expDown},
	} {
		if w.src == nil {
			continue // v on a K=V layer
		}
		if *w.dst, err = e.weight(w.src); err != nil {
			return el, err
		}
	}
	el.moe.RouterRoot, el.moe.Eps, el.moe.TopK = e.m.routerRoot, e.m.eps, e.m.topK
	return el, nil
}

// weight uploads a tensor once (tied layers and embeddings share it).
func (e *Engine) weight(w *tensor) (backend.Weight, error) {
	if r, ok := e.mats[w.Name]; ok {
		return r, nil
	}
	r, err := e.b.UploadWeight(w.TensorData)
	if err != nil {
		return nil, fmt.Errorf("model: engine: %w", err)
	}
	e.mats[w.Name] = r
	e.owned = append(e.owned, r)
	return r, nil
}

// vector uploads a vector once (shared slices are uploaded once).
func (e *Engine) vector(v []float32) (backend.Buf, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("model: engine: empty vector")
	}
	if b, ok := e.vecs[&v[0]]; ok && b.Len() == len(v) {
		return b, nil
	}
	b, err := e.upload(v)
	if err != nil {
		return nil, err
	}
	e.vecs[&v[0]] = b
	return b, nil
}

func (e *Engine) upload(v []float32) (backend.Buf, error) {
	b, err := e.b.Alloc(len(v))
	if err != nil {
		return nil, fmt.Errorf("model: engine: %w", err)
	}
	e.owned = append(e.owned, b)
	if err := e.b.Upload(b, v); err != nil {
		return nil, fmt.Errorf("model: engine: %w", err)
	}
	return b, nil
}

// Close frees every buffer and weight the engine holds (not the backend).
func (e *Engine) Close() error {
	var errs []error
	errs = append(errs, e.s.free())
	for _, o := range slices.Backward(e.owned) {
		if err := o.Free(); err != nil {
			errs = append(errs, err)
		}
	}
	e.owned = nil
	return errors.Join(errs...)
}
