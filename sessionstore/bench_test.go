package sessionstore

import (
	"testing"

	"github.com/pyjail/pyjail/record"
)

// BenchmarkSave is the cost of hibernating a session of 1 MiB of state:
// two files written and fsynced, two directory fsyncs, one blob removed.
func BenchmarkSave(b *testing.B) {
	s := newStore(b, Options{OwnerBytes: 1 << 30})
	cps := []*record.Checkpoint{checkpoint(blob(mib, 1)), checkpoint(blob(mib, 2))}
	b.SetBytes(mib)
	i := 0
	for b.Loop() {
		// Alternate blobs, so every Save replaces one with another.
		if err := s.Save(record.ProfileCalc, "tenant:a/x", cps[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkLoad is the cost of resuming it: the manifest read and
// checked, the blob read and hashed.
func BenchmarkLoad(b *testing.B) {
	s := newStore(b, Options{MaxBlobBytes: 2 * mib})
	save(b, s, record.ProfileCalc, "tenant:a/x", blob(mib, 1))
	b.SetBytes(mib)
	for b.Loop() {
		if _, err := s.Load(record.ProfileCalc, "tenant:a/x"); err != nil {
			b.Fatal(err)
		}
	}
}
