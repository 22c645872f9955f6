// The Metal host engine's runtime interface (fibers.c or threads.c), shared by the
// runtime, the sanitizer driver (driver.c) and the generated launchers,
// which repeat these declarations in C++ (metal/host_launch.go).

#ifndef DGQ_HOST_RUNTIME_H
#define DGQ_HOST_RUNTIME_H

// geo[] of a thread, as the launchers pass it to a kernel's
// thread-position parameters: thread in group (3), group in grid (3),
// threads per group (3), groups per grid (3), lane, SIMD group.
#define DGQ_GEO_LID 0
#define DGQ_GEO_GID 3
#define DGQ_GEO_LSIZE 6
#define DGQ_GEO_NGROUPS 9
#define DGQ_GEO_LANE 12
#define DGQ_GEO_SIMD 13
#define DGQ_GEO_N 14

// Launch results (metal/host_engine.go maps them to errors).
#define DGQ_ERR_GEOMETRY 1  // threads per group not in 1…DGQ_MAX_THREADS
#define DGQ_ERR_THREADS 2   // a thread could not be created
#define DGQ_ERR_DIVERGENT 3 // the threads of a group met different barriers
#define DGQ_ERR_MEMORY 4    // out of memory

#define DGQ_MAX_THREADS 1024
#define DGQ_STACK (1u << 20) // bytes of stack per thread

// A kernel's body for one thread: its arguments (buffer pointers, pointers
// to scalar bytes) and its geo[].
typedef void (*dgq_body)(void* const* args, const unsigned* geo);

// dgq_geometry is a launch's shape, as both runtimes keep it.
struct dgq_geometry {
	unsigned groups[3], threads[3]; // per grid, per group (x, y, z)
	unsigned nthreads, nsimd;       // threads of a group, its SIMD groups of 32
};

// dgq_geometry_read fills g from dims (the groups, then the threads of a
// group, x y z). It returns DGQ_ERR_GEOMETRY for no or more than
// DGQ_MAX_THREADS threads per group, -1 for an empty grid (nothing to run),
// 0 otherwise.
static inline int dgq_geometry_read(const unsigned* dims, struct dgq_geometry* g) {
	unsigned long nt = 1, ng = 1;
	for (int d = 0; d < 3; d++) {
		g->groups[d] = dims[d];
		g->threads[d] = dims[3 + d];
		ng *= dims[d];
		nt *= dims[3 + d];
	}
	if (nt == 0 || nt > DGQ_MAX_THREADS) return DGQ_ERR_GEOMETRY;
	if (ng == 0) return -1;
	g->nthreads = (unsigned)nt;
	g->nsimd = (g->nthreads + 31) / 32;
	return 0;
}

// dgq_rt_run runs body for every thread of a launch: dims are the groups
// (x, y, z) then the threads of a group (x, y, z). It returns 0 or a
// DGQ_ERR_ code.
int dgq_rt_run(dgq_body body, void* const* args, const unsigned* dims);

// What metal_stdlib.h calls in host mode.
void dgq_rt_barrier(void);
void dgq_rt_simd_barrier(void);
void dgq_rt_simd_exchange(const void* mine, void* all, unsigned size);
unsigned dgq_rt_simd_lanes(void);
unsigned dgq_rt_lane(void);

// The launcher table of a sanitizer build's unit: {name, launcher}, ended
// by a null name.
struct dgq_entry {
	const char* name;
	int (*launch)(void* const* args, const unsigned* dims);
};

#endif
