// Package msl checks Metal Shading Language translation units on a machine
// without Apple's compiler, and holds the CPU stand-in for metal_stdlib that
// the check and the Metal host engine compile against.
//
// Check runs clang 19's C++14 front end (Metal's language is C++14 with
// address spaces and attributes) over the exact text of a unit as the
// compiler of a compile plan sees it (Target: its __METAL_VERSION__ and the
// pragmas it must receive), with `#include <metal_stdlib>` resolving to this
// package's metal_stdlib.h (Stdlib) and no other include path, first
// preprocessing the unit (-E), then compiling it to LLVM IR:
//
//	clang-19 -x c++ -std=c++14 -nostdinc -nostdinc++ -fno-exceptions -fno-rtti
//	  -Werror -Wall -Wextra -pedantic -Wconversion -Wshadow-all -Wdouble-promotion -Wvla -Wgnu
//	  -Wno-unused-parameter -Wno-unused-function -Wno-unknown-pragmas
//	  -D__METAL_VERSION__=<300|320> -I <dir> (-E | -S -emit-llvm -O0 -gline-tables-only) -o -
//
// (unused parameters and functions are the norm in a unit: every kernel gets
// every thread-position parameter and every file the whole common include).
// What it rejects:
//
//   - anything not declared by the header: CUDA's names (__syncthreads,
//     sqrtf, threadIdx), misspelled Metal functions, libc;
//   - pointers of one address space where another is declared (device,
//     constant, threadgroup and thread are distinct clang address spaces),
//     writes through const device pointers and to constant scalars;
//   - attributes outside an allow-list (buffer and the thread-position
//     attributes are empty macros in the header; anything else stays an
//     unknown attribute), double, variable-length arrays, GNU extensions,
//     implicit narrowing or sign changes (-Wconversion: stricter than Metal,
//     and the kernels are clean of it), half as a name (a keyword in Metal);
//   - SHARED arrays outside a kernel body, as Metal does;
//   - found in the preprocessed text (pragmas.go): pragmas other than
//     `METAL fp math_mode(safe)`, `METAL fp contract(off)`, `STDC
//     FP_CONTRACT OFF` and `unroll` (clang would only ignore them), and a
//     target's pragma that does not reach the unit's file scope or the
//     bodies of the prelude's rounding helpers (compiled out, dropped,
//     after a statement);
//   - found by scanning the text: constructs Metal does not have — goto,
//     new, delete, virtual, thread_local, register, noexcept, typeid,
//     lambdas, inline assembly (try, throw and dynamic_cast fail under
//     -fno-exceptions and -fno-rtti);
//   - found in the emitted LLVM IR: recursion (a cycle of calls among the
//     unit's functions), calls through function pointers, and variables at
//     program scope or static locals outside the constant and threadgroup
//     address spaces.
//
// A failure is an error wrapping ErrMSL that names the first diagnostics by
// the kernel file and line (the unit's #line directives); clang's absence is
// ErrNoClang, whose message says how to install it. Check proves the units
// are C++14 within these rules, not that Apple's compiler accepts them: what
// the host engine and this check prove and do not is in docs/metal-host.md.
package msl
