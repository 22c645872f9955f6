// Package selftest proves a backend on the machine it runs on, in one call
// and with nothing but the dgq binary (Run, which `dgq selftest` calls):
//
//   - conformance: the backend conformance suite (runtime/conformance) with
//     the options the backend's Caps give (Small under Options.Quick);
//   - kernels: every kernel the backend may launch, compiled, with its
//     compiler's log and its limits (backend.KernelReporter);
//   - arithmetic: a probe of the f32 arithmetic the bit-exact ops rely on
//     (backend.ArithmeticProber);
//   - parity: the embedded tiny checkpoint (dgq/testmodel), quantized into
//     packs, run through model.Engine on the backend against transformers'
//     reference and, for a GPU backend, against the CPU backend
//     (check.Parity);
//   - lockstep: seeded generations on the backend in lockstep with the CPU
//     backend, every difference explained (check.GenerateLockstep);
//
// and describes the environment: OS and version, CPU, memory, the device
// (backend.DeviceDescriber), dgq's version and commit. A part the backend
// does not offer (a CPU backend compiles no kernels) is absent from the
// report, not skipped: every part in it passed or failed, and the report
// passes only when every part did.
//
// Doctor (`dgq doctor`) describes the machine for dgq without proving
// anything: the environment, the CPU's SIMD features and the codec kernels
// they select (codecs.Kernels), every backend opened and closed at once
// (usable, or the reason), the Hugging Face cache root, whether a token is
// configured (hub.LookupToken; never the token), free disk, and the build.
// ReadBuild (`dgq version`) is the binary's build information: version,
// commit or why there is none, Go version, target and every build setting.
package selftest
