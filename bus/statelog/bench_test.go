package statelog

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func BenchmarkCreate(b *testing.B) {
	e := newEnv(b)
	l := e.open(Config{})
	c := ctx(b)
	val := make([]byte, 512)
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		if _, err := l.Create(c, fmt.Sprintf("bench/pods/ns/p%d", i), val, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
}

func BenchmarkCreate8Concurrent(b *testing.B) {
	e := newEnv(b)
	l := e.open(Config{})
	c := ctx(b)
	val := make([]byte, 512)
	var n atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := l.Create(c, fmt.Sprintf("bench/pods/ns/p%d", i), val, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
}
