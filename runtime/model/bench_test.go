package model

import "testing"

// BenchmarkDenoiseTiny is one denoising step (no self-conditioning) of the
// tiny fixture's bf16 pack after its 21-token prompt: 16 canvas positions,
// 6 layers, vocab 512.
func BenchmarkDenoiseTiny(b *testing.B) {
	m := loadModel(b, "tiny", "bf16")
	e := cpuEngine(b, m, 0)
	c := e.NewCache()
	defer c.Free()
	prompt := make([]int, 21)
	canvas := make([]int, m.Config().CanvasLength)
	for i := range prompt {
		prompt[i] = 3 + i*7
	}
	for i := range canvas {
		canvas[i] = 5 + i*11
	}
	if err := e.Prefill(b.Context(), c, prompt, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Denoise(b.Context(), c, canvas, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}
