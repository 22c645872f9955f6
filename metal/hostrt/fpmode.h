// The floating-point mode of the threads that run kernels (threads.c,
// fibers.c). With DGQ_RT_FLUSH defined (metal.HostOptions.FlushSubnormals)
// every such thread flushes f32 subnormals to zero, inputs and results of
// arithmetic alike, as Apple GPUs may: x86-64's MXCSR FTZ (bit 15) and DAZ
// (bit 6), AArch64's FPCR.FZ (bit 24, which does both). Without it the
// threads keep IEEE arithmetic. The mode is per thread, so the Go program's
// own threads are never affected.

#ifndef DGQ_HOST_FPMODE_H
#define DGQ_HOST_FPMODE_H

static void dgq_fp_mode(void) {
#ifdef DGQ_RT_FLUSH
#if defined(__x86_64__)
	unsigned csr;
	__asm__ volatile("stmxcsr %0" : "=m"(csr));
	csr |= 0x8040u;
	__asm__ volatile("ldmxcsr %0" : : "m"(csr));
#elif defined(__aarch64__)
	unsigned long fpcr;
	__asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
	fpcr |= 1ul << 24;
	__asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
#else
#error "DGQ_RT_FLUSH: no flush-to-zero control for this architecture"
#endif
#endif
}

#endif
