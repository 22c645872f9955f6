//go:build !dgq_metalhost

package metal

// openEngine is the engine of the registered backend: the system's default
// Metal device. (A test build with the tag dgq_metalhost runs the backend
// on the host engine instead: register_hostengine.go.)
func openEngine() (Engine, error) {
	e, err := OpenDevice(Options{})
	if err != nil {
		return nil, err
	}
	return e, nil
}
