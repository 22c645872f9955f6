//go:build !unix

package dgq

// processUmask is 0 where there is no umask: modes are used as given.
var processUmask uint32
