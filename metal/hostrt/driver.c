// The Metal host engine's sanitizer driver: the main of a unit built as an
// executable under -fsanitize=thread or -fsanitize=address (a sanitizer's
// runtime must start with the process, so such builds do not load into the
// Go program). It runs one launch described by a request file and writes the
// buffers back to a response file:
//
//   request:  "DGQR" | u32 len, kernel name | u32 dims[6]
//             | u32 nmem, per buffer: u64 len, bytes
//             | u32 narg, per argument: u32 kind (0 buffer, 1 scalar),
//               buffer: u32 mem, u64 offset; scalar: u32 len, bytes
//   response: "DGQA" | i32 the launch's result | per buffer: its bytes
//
// Integers are little-endian (the hosts it runs on). Every buffer and scalar
// gets a heap block of exactly its size, so that AddressSanitizer sees an
// access past its end (at most 4096 buffers and 64 arguments). Exit status: 0, 2 for a bad request or file, or the
// sanitizer's own.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

extern const struct dgq_entry dgq_entries[];

static unsigned char* data;
static size_t size, at;

// Every heap block the driver takes, freed before it returns (so that
// LeakSanitizer has nothing to say about the driver itself).
#define MAX_BLOCKS 8400
static void* owned[MAX_BLOCKS];
static size_t nowned;

static void release(void) {
	while (nowned > 0) free(owned[--nowned]);
}

static int fail(const char* what) {
	fprintf(stderr, "dgq driver: %s\n", what);
	release();
	return 2;
}

// block returns n zeroed bytes (at least one byte is allocated), or exits.
static void* block(size_t n) {
	void* p = nowned < MAX_BLOCKS ? calloc(n > 0 ? n : 1, 1) : NULL;
	if (p == NULL) exit(fail("out of memory"));
	owned[nowned++] = p;
	return p;
}

static int take(void* dst, size_t n) {
	if (n > size - at) return 0;
	memcpy(dst, data + at, n);
	at += n;
	return 1;
}

int main(int argc, char** argv) {
	if (argc != 3) return fail("usage: driver REQUEST RESPONSE");
	FILE* f = fopen(argv[1], "rb");
	if (f == NULL) return fail("cannot open the request");
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	if (n < 0) return fail("cannot size the request");
	size = (size_t)n;
	data = block(size);
	size_t got = fread(data, 1, size, f);
	fclose(f);
	if (got != size) return fail("cannot read the request");

	char magic[4];
	uint32_t namelen, dims[6], nmem, narg;
	if (!take(magic, 4) || memcmp(magic, "DGQR", 4) != 0 || !take(&namelen, 4) || namelen > 4096) return fail("bad request");
	char* name = block(namelen + 1);
	if (!take(name, namelen) || !take(dims, sizeof dims) || !take(&nmem, 4) || nmem > 4096) return fail("bad request");
	unsigned char** mems = block((nmem + 1) * sizeof *mems);
	uint64_t* lens = block((nmem + 1) * sizeof *lens);
	for (uint32_t i = 0; i < nmem; i++) {
		if (!take(&lens[i], 8) || lens[i] > size - at) return fail("bad request buffer");
		mems[i] = block(lens[i]);
		take(mems[i], lens[i]);
	}
	if (!take(&narg, 4) || narg > 64) return fail("bad request");
	void** args = block((narg + 1) * sizeof *args);
	for (uint32_t i = 0; i < narg; i++) {
		uint32_t kind, k;
		if (!take(&kind, 4) || !take(&k, 4)) return fail("bad request argument");
		if (kind == 0) {
			uint64_t off;
			if (k >= nmem || !take(&off, 8) || off > lens[k]) return fail("bad buffer argument");
			args[i] = mems[k] + off;
		} else {
			if (k > 64 || k > size - at) return fail("bad scalar argument");
			args[i] = block(k);
			take(args[i], k);
		}
	}
	int (*launch)(void* const*, const unsigned*) = NULL;
	for (const struct dgq_entry* e = dgq_entries; e->name != NULL; e++) {
		if (strcmp(e->name, name) == 0) launch = e->launch;
	}
	if (launch == NULL) return fail("unknown kernel");
	unsigned d[6];
	for (int i = 0; i < 6; i++) d[i] = dims[i];
	int32_t rc = launch(args, d);

	f = fopen(argv[2], "wb");
	if (f == NULL) return fail("cannot create the response");
	fwrite("DGQA", 1, 4, f);
	fwrite(&rc, 4, 1, f);
	for (uint32_t i = 0; i < nmem; i++) fwrite(mems[i], 1, lens[i], f);
	if (fclose(f) != 0) return fail("cannot write the response");
	release();
	return 0;
}
