package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// signalCause is the cause of the context main cancels when SIGINT or
// SIGTERM arrives (context.Cause): it counts as context.Canceled, so every
// library error it ends classifies as interrupted, and it names the signal
// for the exit code (128 + the signal's number: 130, 143) and the message.
type signalCause struct{ sig syscall.Signal }

func (c signalCause) Error() string { return c.name() + " received" }

// Is makes errors.Is(c, context.Canceled) true.
func (c signalCause) Is(target error) bool { return target == context.Canceled }

func (c signalCause) name() string {
	switch c.sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return c.sig.String()
}

// code is the exit code of the interruption: 128 + the signal's number.
func (c signalCause) code() int {
	if c.sig == syscall.SIGTERM {
		return exitTerminated
	}
	return exitCanceled
}

// interruptContext returns a context that the first SIGINT or SIGTERM
// cancels with a signalCause. After that signal the default action is back:
// a second one ends the process at once, the way out of a cleanup that
// hangs. stop releases the signal handling.
func interruptContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			sig, _ := s.(syscall.Signal)
			cancel(signalCause{sig: sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// partialResult wraps the error of an interrupted command that has a
// partial result to point to: detail ends the interruption line ("after 2
// blocks; the reply so far is above"); jsonDone says the command printed its
// own JSON object for --json (so no error object follows).
type partialResult struct {
	err      error
	detail   string
	jsonDone bool
}

func (p *partialResult) Error() string { return p.err.Error() }
func (p *partialResult) Unwrap() error { return p.err }

// interruption is the exit code and the one line of an interrupted command
// (err classified as interrupted): "dgq: CMD: interrupted by SIGINT", the
// partial result's detail when there is one; and whether the JSON error
// object is still to be printed (json, unless the command printed its own).
func interruption(ctx context.Context, cmd *cobra.Command, err error, json bool) (code int, msg string, jsonErr bool) {
	code, by := exitCanceled, ""
	var sc signalCause
	if errors.As(context.Cause(ctx), &sc) || errors.As(err, &sc) {
		code, by = sc.code(), " by "+sc.name()
	}
	name := "dgq"
	if cmd != nil && cmd.Name() != "dgq" {
		name = "dgq: " + cmd.Name()
	}
	msg = fmt.Sprintf("%s: interrupted%s", name, by)
	var p *partialResult
	if errors.As(err, &p) {
		if p.detail != "" {
			msg += " " + oneLine(p.detail)
		}
		json = json && !p.jsonDone
	}
	return code, msg, json
}
