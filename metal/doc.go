// Package metal is dgq's Metal backend: the runtime's backend.Backend on
// Apple silicon, registered as backend "metal".
//
// It is built over a small engine seam (Engine: alloc, wrap, pipeline,
// dispatch, sync) with two implementations: the real one on darwin, which
// drives Metal.framework through purego's Objective-C runtime bindings (no
// cgo), and a host engine, which runs the very Metal text of every kernel on
// the CPU from a clang-built shared library, so that Linux CI proves the
// backend before a Mac runs it. docs/metal.md says what is proven where.
package metal
