// The Metal host engine's runtime with OS threads (package metal,
// host_engine.go; metal.ThreadsOS, and every sanitizer build): it runs a
// kernel's every thread on the CPU. A launch runs the threadgroups one after
// another; the threads of a group are OS threads (pthreads), created once per
// launch, each looping over the groups. fibers.c is the other implementation
// of runtime.h. Between groups all of them meet at
// an end-of-group barrier, so the group-shared (static) arrays of one group
// are free again when the next starts.
//
// Barriers (threadgroup_barrier) are mutex-and-condition barriers of the
// group's threads; a SIMD group's 32 lanes exchange values through slots
// guarded by a barrier of their own (metal_stdlib.h builds simd_sum and the
// like on dgq_rt_simd_exchange). A barrier records what kind of meeting its
// current round is (a kernel barrier, the end of the group, a SIMD
// exchange): a thread that arrives for another kind, or leaves the kernel
// while lanes of its SIMD group wait in an exchange, means the threads
// diverged — undefined in Metal, a hang if let be — so the launch is aborted
// (every barrier lets everyone through) and reports DGQ_ERR_DIVERGENT.
//
// Compiled as C11 with the system headers, linked into every unit's library
// (or, in a sanitizer build, into its executable); the symbols are hidden but
// for what the driver needs.

#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fpmode.h"
#include "runtime.h"

enum { KIND_BARRIER = 1, KIND_END = 2, KIND_SIMD = 3 };

// SLOT is the most bytes one lane exchanges (a float4).
#define SLOT 16

struct bar {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned n;        // threads that meet here
	unsigned arrived;  // of this round
	unsigned gen;      // rounds completed
	int kind;          // the kind of this round
	unsigned departed; // SIMD barriers: lanes that finished the group's kernel
};

struct launch {
	dgq_body body;
	void* const* args;
	struct dgq_geometry g;
	struct bar group;
	struct bar* simd;                   // [nsimd]
	unsigned char (*slots)[32][SLOT];   // [nsimd]
	int abort;                          // atomic: the launch is aborted
	int err;                            // atomic: the first error
};

struct worker {
	struct launch* l;
	pthread_t th;
	unsigned tid, lane, simd;
	unsigned geo[DGQ_GEO_N];
};

static __thread struct worker* cur;

static int aborted(struct launch* l) { return __atomic_load_n(&l->abort, __ATOMIC_ACQUIRE); }

static void bar_init(struct bar* b, unsigned n) {
	memset(b, 0, sizeof *b);
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cv, NULL);
	b->n = n;
}

static void bar_destroy(struct bar* b) {
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
}

static void bar_wake(struct bar* b) {
	pthread_mutex_lock(&b->mu);
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

// abort_launch records err (the first one wins) and lets every waiter go.
static void abort_launch(struct launch* l, int err) {
	int zero = 0;
	__atomic_compare_exchange_n(&l->err, &zero, err, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	__atomic_store_n(&l->abort, 1, __ATOMIC_RELEASE);
	bar_wake(&l->group);
	for (unsigned i = 0; i < l->g.nsimd; i++) bar_wake(&l->simd[i]);
}

// bar_wait meets the other threads of b for a round of the given kind. The
// last arrival of an end-of-group round also clears the SIMD barriers'
// departures (everyone else is waiting here).
static void bar_wait(struct launch* l, struct bar* b, int kind) {
	pthread_mutex_lock(&b->mu);
	if (aborted(l)) {
		pthread_mutex_unlock(&b->mu);
		return;
	}
	int diverged = (kind == KIND_SIMD && b->departed > 0) || (b->arrived > 0 && b->kind != kind);
	if (diverged) {
		pthread_mutex_unlock(&b->mu);
		abort_launch(l, DGQ_ERR_DIVERGENT);
		return;
	}
	b->kind = kind;
	if (++b->arrived == b->n) {
		if (kind == KIND_END) {
			for (unsigned i = 0; i < l->g.nsimd; i++) l->simd[i].departed = 0;
		}
		b->arrived = 0;
		b->gen++;
		pthread_cond_broadcast(&b->cv);
	} else {
		unsigned gen = b->gen;
		while (gen == b->gen && !aborted(l)) pthread_cond_wait(&b->cv, &b->mu);
	}
	pthread_mutex_unlock(&b->mu);
}

// simd_depart records that a lane finished the group's kernel; lanes of its
// SIMD group waiting in an exchange then never complete it.
static void simd_depart(struct launch* l, struct bar* b) {
	pthread_mutex_lock(&b->mu);
	b->departed++;
	int diverged = b->arrived > 0;
	pthread_mutex_unlock(&b->mu);
	if (diverged) abort_launch(l, DGQ_ERR_DIVERGENT);
}

void dgq_rt_barrier(void) { bar_wait(cur->l, &cur->l->group, KIND_BARRIER); }

void dgq_rt_simd_barrier(void) { bar_wait(cur->l, &cur->l->simd[cur->simd], KIND_SIMD); }

unsigned dgq_rt_simd_lanes(void) { return cur->l->simd[cur->simd].n; }

unsigned dgq_rt_lane(void) { return cur->lane; }

void dgq_rt_simd_exchange(const void* mine, void* all, unsigned size) {
	struct worker* w = cur;
	struct launch* l = w->l;
	if (size > SLOT) {
		abort_launch(l, DGQ_ERR_GEOMETRY);
		memset(all, 0, 32u * size);
		return;
	}
	memcpy(l->slots[w->simd][w->lane], mine, size);
	bar_wait(l, &l->simd[w->simd], KIND_SIMD);
	for (unsigned i = 0; i < 32; i++) memcpy((unsigned char*)all + i * size, l->slots[w->simd][i], size);
	bar_wait(l, &l->simd[w->simd], KIND_SIMD);
}

static void* work(void* arg) {
	struct worker* w = arg;
	struct launch* l = w->l;
	cur = w;
	dgq_fp_mode();
	unsigned gx = l->g.groups[0], gy = l->g.groups[1], gz = l->g.groups[2];
	unsigned long total = (unsigned long)gx * gy * gz;
	unsigned tx = l->g.threads[0], ty = l->g.threads[1];
	for (int d = 0; d < 3; d++) {
		w->geo[DGQ_GEO_LSIZE + d] = l->g.threads[d];
		w->geo[DGQ_GEO_NGROUPS + d] = l->g.groups[d];
	}
	w->geo[DGQ_GEO_LID + 0] = w->tid % tx;
	w->geo[DGQ_GEO_LID + 1] = (w->tid / tx) % ty;
	w->geo[DGQ_GEO_LID + 2] = w->tid / (tx * ty);
	w->geo[DGQ_GEO_LANE] = w->lane;
	w->geo[DGQ_GEO_SIMD] = w->simd;
	for (unsigned long g = 0; g < total && !aborted(l); g++) {
		w->geo[DGQ_GEO_GID + 0] = (unsigned)(g % gx);
		w->geo[DGQ_GEO_GID + 1] = (unsigned)((g / gx) % gy);
		w->geo[DGQ_GEO_GID + 2] = (unsigned)(g / ((unsigned long)gx * gy));
		l->body(l->args, w->geo);
		simd_depart(l, &l->simd[w->simd]);
		bar_wait(l, &l->group, KIND_END);
	}
	cur = NULL;
	return NULL;
}

int dgq_rt_run(dgq_body body, void* const* args, const unsigned* dims) {
	struct launch l;
	memset(&l, 0, sizeof l);
	l.body = body;
	l.args = args;
	int gr = dgq_geometry_read(dims, &l.g);
	if (gr != 0) return gr < 0 ? 0 : gr;
	struct worker* ws = calloc(l.g.nthreads, sizeof *ws);
	l.simd = calloc(l.g.nsimd, sizeof *l.simd);
	l.slots = calloc(l.g.nsimd, sizeof *l.slots);
	if (ws == NULL || l.simd == NULL || l.slots == NULL) {
		free(ws);
		free(l.simd);
		free(l.slots);
		return DGQ_ERR_MEMORY;
	}
	bar_init(&l.group, l.g.nthreads);
	for (unsigned i = 0; i < l.g.nsimd; i++) bar_init(&l.simd[i], l.g.nthreads - 32 * i < 32 ? l.g.nthreads - 32 * i : 32);

	// The workers start with every signal blocked, so that signals go to the
	// host program's own threads (a Go runtime's handlers expect its threads).
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, DGQ_STACK);
	unsigned started = 0;
	for (; started < l.g.nthreads; started++) {
		struct worker* w = &ws[started];
		w->l = &l;
		w->tid = started;
		w->lane = started % 32;
		w->simd = started / 32;
		if (pthread_create(&w->th, &attr, work, w) != 0) {
			abort_launch(&l, DGQ_ERR_THREADS);
			break;
		}
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (unsigned i = 0; i < started; i++) pthread_join(ws[i].th, NULL);

	int err = __atomic_load_n(&l.err, __ATOMIC_ACQUIRE);
	bar_destroy(&l.group);
	for (unsigned i = 0; i < l.g.nsimd; i++) bar_destroy(&l.simd[i]);
	free(ws);
	free(l.simd);
	free(l.slots);
	return err;
}
