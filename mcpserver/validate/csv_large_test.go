package validate

import (
	"io"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// genCSV produces a CSV in the shape of the built-in "dataset" CSV schema
// on the fly, up to size bytes (whole rows), so that large inputs never
// sit in the test's own memory.
type genCSV struct {
	size, produced int64
	row            int64
	buf            []byte // unread part of line
	line           []byte // backing store, reused for every row
	header         bool
}

func newGenCSV(size int64) *genCSV { return &genCSV{size: size} }

func (g *genCSV) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(g.buf) == 0 {
			if g.produced >= g.size {
				break
			}
			g.next()
		}
		c := copy(p[n:], g.buf)
		g.buf = g.buf[c:]
		n += c
		g.produced += int64(c)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (g *genCSV) next() {
	b := g.line[:0]
	if !g.header {
		g.header = true
		g.line = append(b, "id,name,category,value,recorded_at,active\n"...)
		g.buf = g.line
		return
	}
	g.row++
	b = strconv.AppendInt(b, g.row, 10)
	b = append(b, ",item-"...)
	b = strconv.AppendInt(b, g.row*7919%100000, 10)
	b = append(b, ",\"cat, "...)
	b = strconv.AppendInt(b, g.row%17, 10)
	b = append(b, "\","...)
	b = strconv.AppendInt(b, g.row%1000, 10)
	b = append(b, '.', byte('0'+g.row%10))
	b = append(b, ",2024-05-01T17:00:00Z,"...)
	if g.row%3 == 0 {
		b = append(b, "false"...)
	} else {
		b = append(b, "true"...)
	}
	g.line = append(b, '\n')
	g.buf = g.line
}

// peakHeap runs f while sampling HeapInuse, and returns the peak above
// the level before f started.
func peakHeap(f func()) (peak uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > peak {
				peak = ms.HeapInuse - base
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	return peak
}

// TestValidateCSV100MB streams 100 MB through ValidateCSV, with and without
// a unique column, and checks that the heap stays bounded: by the record
// buffers without unique, plus about 40 bytes per distinct value with it.
func TestValidateCSV100MB(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB stream skipped under -short")
	}
	const size = 100 << 20
	withUnique := mustDatasetCSV(t)
	withoutUnique := withUnique.clone()
	for i := range withoutUnique.Columns {
		withoutUnique.Columns[i].Unique = false
	}
	for name, tc := range map[string]struct {
		schema  *CSVSchema
		maxHeap uint64
	}{
		"structure only": {nil, 16 << 20},
		"no unique":      {withoutUnique, 16 << 20},
		// ~1.9 M distinct ids at ~40 B each.
		"unique id": {withUnique, 160 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			var res *CSVResult
			var err error
			start := time.Now()
			peak := peakHeap(func() {
				res, err = ValidateCSV(t.Context(), newGenCSV(size), tc.schema, DefaultCSVOptions())
			})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Valid {
				t.Fatalf("generated CSV invalid: %+v", res.Errors)
			}
			t.Logf("%d rows, %.0f MB/s, peak heap in use %.1f MiB", res.Rows, float64(size)/1e6/elapsed.Seconds(), float64(peak)/(1<<20))
			if peak > tc.maxHeap {
				t.Errorf("peak heap %d MiB, want at most %d MiB", peak>>20, tc.maxHeap>>20)
			}
		})
	}
}

func mustDatasetCSV(tb testing.TB) *CSVSchema {
	tb.Helper()
	r, err := NewRegistry("", DefaultLimits())
	if err != nil {
		tb.Fatal(err)
	}
	s, ok := r.CSVSchema("dataset")
	if !ok {
		tb.Fatal("no dataset CSV schema")
	}
	return s
}

// BenchmarkValidateCSV reports throughput (MB/s) on 16 MB of the dataset
// shape; run with -benchmem for allocations.
func BenchmarkValidateCSV(b *testing.B) {
	const size = 16 << 20
	schema := mustDatasetCSV(b)
	for name, s := range map[string]*CSVSchema{"structure": nil, "dataset": schema} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if _, err := ValidateCSV(b.Context(), newGenCSV(size), s, DefaultCSVOptions()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidateJSON(b *testing.B) {
	r, err := NewRegistry("", DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(validUser)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		v, err := DecodeInstance(data, DefaultLimits())
		if err != nil {
			b.Fatal(err)
		}
		if res, err := r.Validate("user", v); err != nil || !res.Valid {
			b.Fatal(err, res)
		}
	}
}
