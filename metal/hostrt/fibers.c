// The Metal host engine's runtime with fibers (package metal, host_engine.go;
// metal.ThreadsFibers, the default without a sanitizer): it runs a kernel's
// every thread on the CPU, as threads.c does, but the threads of a group are
// fibers — each its own stack and saved registers — that one OS thread runs
// in turn, so that a barrier costs a few context switches in user space
// instead of waking hundreds of OS threads.
//
// A launch runs on one OS thread of its own (signals blocked, the
// floating-point mode of fpmode.h), the threadgroups one after another. For
// each group every fiber starts at the kernel's body; the scheduler resumes,
// in thread order, every fiber that can run, and each runs until it meets a
// barrier (threadgroup_barrier), a SIMD meeting (an exchange of values or
// simdgroup_barrier) or the end of the kernel. When none can run:
//
//   - every thread waits at a barrier: all go on;
//   - else every SIMD group whose lanes all wait at a SIMD meeting goes on;
//   - if neither frees a thread, the threads diverged (some met a barrier or
//     SIMD meeting that others skipped or left the kernel past): undefined in
//     Metal, a hang if let be, so the launch ends with DGQ_ERR_DIVERGENT.
//
// A SIMD exchange is two meetings (each lane publishes its value, then reads
// all of them before any lane may publish again), as in threads.c.
//
// Fiber stacks (FIBER_STACK bytes, a PROT_NONE guard page below each, so an
// overflow faults instead of writing into another stack) are kept in one
// mapping per library, grown to the largest launch and reused; launches of
// one library are serialized. The context switch is a few instructions of
// assembly on x86-64 (the System V callee-saved registers) and glibc's
// swapcontext elsewhere (or where DGQ_RT_UCONTEXT is defined).
//
// Compiled as C11 with the system headers, linked into every unit's library;
// the symbols are hidden.

#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fpmode.h"
#include "runtime.h"

#if !defined(__x86_64__) && !defined(DGQ_RT_UCONTEXT)
#define DGQ_RT_UCONTEXT
#endif
#ifdef DGQ_RT_UCONTEXT
#include <ucontext.h>
#endif

// FIBER_STACK is each fiber's stack: kernels keep small frames (a few
// hundred bytes of locals and the host's simdgroup matrices), libm's
// functions little more.
#define FIBER_STACK (128u << 10)

// SLOT is the most bytes one lane exchanges (a float4 or a pointer pair).
#define SLOT 16

enum { F_RUN = 0, F_BAR = 1, F_SIMD = 2, F_DONE = 3 };

struct fiber {
#ifdef DGQ_RT_UCONTEXT
	ucontext_t ctx;
#else
	void* sp; // the saved stack pointer (its registers lie above it)
#endif
	int state;
	unsigned tid, lane, simd;
	unsigned geo[DGQ_GEO_N];
	unsigned char* stack; // the lowest usable byte (above the guard page)
};

struct launch {
	dgq_body body;
	void* const* args;
	struct dgq_geometry g;
	struct fiber* f;                  // [nthreads]
	unsigned char (*slots)[32][SLOT]; // [nsimd]
	int err;
#ifdef DGQ_RT_UCONTEXT
	ucontext_t sched;
#else
	void* sched_sp;
#endif
};

// The launch and fiber the scheduler thread is running.
static __thread struct launch* cur_l;
static __thread struct fiber* cur_f;

// ---------------------------------------------------------------------------
// Context switch.

#ifndef DGQ_RT_UCONTEXT
// dgq_fiber_switch(from, to) saves the callee-saved registers on the current
// stack, stores the stack pointer in *from, switches to the stack at to and
// restores the registers saved there, returning into its code. A new fiber's
// stack holds six zero registers and fiber_entry as the return address.
void dgq_fiber_switch(void** from, void* to);
__asm__(".text\n"
        ".globl dgq_fiber_switch\n"
        ".hidden dgq_fiber_switch\n"
        ".type dgq_fiber_switch,@function\n"
        ".p2align 4\n"
        "dgq_fiber_switch:\n"
        "\tpushq %rbp\n"
        "\tpushq %rbx\n"
        "\tpushq %r12\n"
        "\tpushq %r13\n"
        "\tpushq %r14\n"
        "\tpushq %r15\n"
        "\tmovq %rsp, (%rdi)\n"
        "\tmovq %rsi, %rsp\n"
        "\tpopq %r15\n"
        "\tpopq %r14\n"
        "\tpopq %r13\n"
        "\tpopq %r12\n"
        "\tpopq %rbx\n"
        "\tpopq %rbp\n"
        "\tret\n"
        ".size dgq_fiber_switch, .-dgq_fiber_switch\n");
#endif

static void fiber_entry(void);

// fiber_start prepares f to start at fiber_entry.
static void fiber_start(struct launch* l, struct fiber* f) {
	f->state = F_RUN;
#ifdef DGQ_RT_UCONTEXT
	getcontext(&f->ctx);
	f->ctx.uc_stack.ss_sp = f->stack;
	f->ctx.uc_stack.ss_size = FIBER_STACK;
	f->ctx.uc_link = &l->sched;
	makecontext(&f->ctx, fiber_entry, 0);
#else
	(void)l;
	// top is 16-aligned; the frame is r15 … rbp, the return address, and the
	// slot of fiber_entry's own return address, so that fiber_entry starts
	// with rsp + 8 a multiple of 16, as after a call.
	uintptr_t top = ((uintptr_t)f->stack + FIBER_STACK) & ~(uintptr_t)15;
	void** sp = (void**)(top - 64);
	memset(sp, 0, 64);
	sp[6] = (void*)fiber_entry;
	f->sp = sp;
#endif
}

// to_fiber runs f until it blocks or ends.
static void to_fiber(struct launch* l, struct fiber* f) {
	cur_f = f;
#ifdef DGQ_RT_UCONTEXT
	swapcontext(&l->sched, &f->ctx);
#else
	dgq_fiber_switch(&l->sched_sp, f->sp);
#endif
}

// to_scheduler leaves the running fiber in state s and returns when the
// scheduler resumes it.
static void to_scheduler(int s) {
	struct fiber* f = cur_f;
	struct launch* l = cur_l;
	f->state = s;
#ifdef DGQ_RT_UCONTEXT
	swapcontext(&f->ctx, &l->sched);
#else
	dgq_fiber_switch(&f->sp, l->sched_sp);
#endif
}

static void fiber_entry(void) {
	struct launch* l = cur_l;
	l->body(l->args, cur_f->geo);
	to_scheduler(F_DONE); // never resumed
	abort();
}

// ---------------------------------------------------------------------------
// Stacks.

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER; // held for a whole launch
static unsigned char* pool;
static size_t pool_len;
static unsigned pool_n;

// stacks makes the pool hold n stacks; 0 or DGQ_ERR_MEMORY.
static int stacks(unsigned n) {
	if (n <= pool_n) return 0;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t each = FIBER_STACK + page;
	size_t len = each * n;
	unsigned char* p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) return DGQ_ERR_MEMORY;
	for (unsigned i = 0; i < n; i++) {
		if (mprotect(p + i * each, page, PROT_NONE) != 0) {
			munmap(p, len);
			return DGQ_ERR_MEMORY;
		}
	}
	if (pool != NULL) munmap(pool, pool_len);
	pool = p;
	pool_len = len;
	pool_n = n;
	return 0;
}

// release_pool unmaps the pool when the library holding this runtime is
// unloaded (the host engine dlcloses every unit's library at Close): each
// unit's library has a pool of its own, whose guard pages split it into two
// mappings a stack, and a process has a bounded number of mappings
// (vm.max_map_count), so pools left behind by closed engines would exhaust
// it.
__attribute__((destructor)) static void release_pool(void) {
	if (pool != NULL) munmap(pool, pool_len);
	pool = NULL;
	pool_len = 0;
	pool_n = 0;
}

// ---------------------------------------------------------------------------
// Meetings.

void dgq_rt_barrier(void) { to_scheduler(F_BAR); }

void dgq_rt_simd_barrier(void) { to_scheduler(F_SIMD); }

unsigned dgq_rt_simd_lanes(void) {
	struct launch* l = cur_l;
	unsigned first = cur_f->simd * 32u;
	return l->g.nthreads - first < 32u ? l->g.nthreads - first : 32u;
}

unsigned dgq_rt_lane(void) { return cur_f->lane; }

void dgq_rt_simd_exchange(const void* mine, void* all, unsigned size) {
	struct launch* l = cur_l;
	struct fiber* f = cur_f;
	if (size > SLOT) {
		l->err = DGQ_ERR_GEOMETRY;
		memset(all, 0, 32u * size);
		to_scheduler(F_DONE); // the launch ends before this fiber runs again
		return;
	}
	memcpy(l->slots[f->simd][f->lane], mine, size);
	to_scheduler(F_SIMD);
	for (unsigned i = 0; i < 32; i++) memcpy((unsigned char*)all + i * size, l->slots[f->simd][i], size);
	to_scheduler(F_SIMD);
}

// release frees the threads that a meeting lets go on (the comment at the
// top); it returns 1 if any, 0 if the threads diverged.
static int release(struct launch* l) {
	unsigned bar = 0;
	for (unsigned i = 0; i < l->g.nthreads; i++) bar += l->f[i].state == F_BAR;
	if (bar == l->g.nthreads) {
		for (unsigned i = 0; i < l->g.nthreads; i++) l->f[i].state = F_RUN;
		return 1;
	}
	int freed = 0;
	for (unsigned s = 0; s < l->g.nsimd; s++) {
		unsigned lo = 32u * s, hi = lo + 32u < l->g.nthreads ? lo + 32u : l->g.nthreads;
		unsigned waiting = 0;
		for (unsigned i = lo; i < hi; i++) waiting += l->f[i].state == F_SIMD;
		if (waiting == hi - lo) {
			for (unsigned i = lo; i < hi; i++) l->f[i].state = F_RUN;
			freed = 1;
		}
	}
	return freed;
}

// run_group runs one group's fibers to their end; 0 or a DGQ_ERR_ code.
static int run_group(struct launch* l) {
	for (unsigned i = 0; i < l->g.nthreads; i++) fiber_start(l, &l->f[i]);
	for (;;) {
		for (unsigned i = 0; i < l->g.nthreads; i++) {
			if (l->f[i].state == F_RUN) to_fiber(l, &l->f[i]);
		}
		if (l->err != 0) return l->err;
		unsigned done = 0;
		for (unsigned i = 0; i < l->g.nthreads; i++) done += l->f[i].state == F_DONE;
		if (done == l->g.nthreads) return 0;
		if (!release(l)) return DGQ_ERR_DIVERGENT;
	}
}

// schedule runs every group of the launch (the launch's own OS thread).
static void* schedule(void* arg) {
	struct launch* l = arg;
	cur_l = l;
	dgq_fp_mode();
	unsigned gx = l->g.groups[0], gy = l->g.groups[1], gz = l->g.groups[2];
	unsigned long total = (unsigned long)gx * gy * gz;
	for (unsigned long g = 0; g < total && l->err == 0; g++) {
		for (unsigned i = 0; i < l->g.nthreads; i++) {
			l->f[i].geo[DGQ_GEO_GID + 0] = (unsigned)(g % gx);
			l->f[i].geo[DGQ_GEO_GID + 1] = (unsigned)((g / gx) % gy);
			l->f[i].geo[DGQ_GEO_GID + 2] = (unsigned)(g / ((unsigned long)gx * gy));
		}
		l->err = run_group(l);
	}
	cur_l = NULL;
	cur_f = NULL;
	return NULL;
}

int dgq_rt_run(dgq_body body, void* const* args, const unsigned* dims) {
	struct launch l;
	memset(&l, 0, sizeof l);
	l.body = body;
	l.args = args;
	int gr = dgq_geometry_read(dims, &l.g);
	if (gr != 0) return gr < 0 ? 0 : gr;
	l.f = calloc(l.g.nthreads, sizeof *l.f);
	l.slots = calloc(l.g.nsimd, sizeof *l.slots);
	if (l.f == NULL || l.slots == NULL) {
		free(l.f);
		free(l.slots);
		return DGQ_ERR_MEMORY;
	}
	pthread_mutex_lock(&pool_mu);
	int err = stacks(l.g.nthreads);
	if (err == 0) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		unsigned tx = l.g.threads[0], ty = l.g.threads[1];
		for (unsigned i = 0; i < l.g.nthreads; i++) {
			struct fiber* f = &l.f[i];
			f->stack = pool + i * (FIBER_STACK + page) + page;
			f->tid = i;
			f->lane = i % 32;
			f->simd = i / 32;
			for (int d = 0; d < 3; d++) {
				f->geo[DGQ_GEO_LSIZE + d] = l.g.threads[d];
				f->geo[DGQ_GEO_NGROUPS + d] = l.g.groups[d];
			}
			f->geo[DGQ_GEO_LID + 0] = i % tx;
			f->geo[DGQ_GEO_LID + 1] = (i / tx) % ty;
			f->geo[DGQ_GEO_LID + 2] = i / (tx * ty);
			f->geo[DGQ_GEO_LANE] = f->lane;
			f->geo[DGQ_GEO_SIMD] = f->simd;
		}
		// The scheduler thread starts with every signal blocked, so that
		// signals go to the host program's own threads.
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_t th;
		if (pthread_create(&th, NULL, schedule, &l) != 0) {
			err = DGQ_ERR_THREADS;
		} else {
			pthread_join(th, NULL);
			err = l.err;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&pool_mu);
	free(l.f);
	free(l.slots);
	return err;
}
