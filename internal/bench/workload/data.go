package workload

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
)

// Digest is a SHA-256 sum.
type Digest [sha256.Size]byte

func (d Digest) String() string { return fmt.Sprintf("%x", d[:]) }

// Short is the first 12 hex digits, for reports.
func (d Digest) Short() string { return d.String()[:12] }

// chunk is the unit data sets are generated and read in.
const chunk = 1 << 20

// WriteFile writes size pseudo-random bytes (ChaCha8 seeded with seed, so
// the same seed gives the same content) to path and returns their digest.
// progress, if not nil, is called with the bytes written so far.
func WriteFile(path string, size int64, seed uint64, progress func(done int64)) (Digest, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return Digest{}, fmt.Errorf("workload: create %s: %w", path, err)
	}
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	src := rand.NewChaCha8(key)
	h := sha256.New()
	buf := make([]byte, chunk)
	var done int64
	for done < size {
		b := buf[:min(int64(len(buf)), size-done)]
		_, _ = src.Read(b) // never fails
		h.Write(b)
		if _, err := f.Write(b); err != nil {
			f.Close()
			return Digest{}, fmt.Errorf("workload: write %s: %w", path, err)
		}
		done += int64(len(b))
		if progress != nil {
			progress(done)
		}
	}
	if err := f.Close(); err != nil {
		return Digest{}, fmt.Errorf("workload: write %s: %w", path, err)
	}
	var d Digest
	h.Sum(d[:0])
	return d, nil
}

// HashFile returns the digest of the file at path.
func HashFile(path string) (Digest, error) {
	f, err := os.Open(path)
	if err != nil {
		return Digest{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, chunk)); err != nil {
		return Digest{}, fmt.Errorf("workload: hash %s: %w", path, err)
	}
	var d Digest
	h.Sum(d[:0])
	return d, nil
}
