package tfrecord

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The CRC-32C check value of "123456789" is 0xE3069283 (RFC 3720 B.4);
// TFRecord masks it by rotating right 15 bits and adding a constant.
func TestMaskedCRCKnownValue(t *testing.T) {
	want := bits.RotateLeft32(0xE3069283, 17) + 0xa282ead8
	if got := MaskedCRC([]byte("123456789")); got != want {
		t.Fatalf("MaskedCRC = %#08x, want %#08x", got, want)
	}
}

func encode(t testing.TB, recs ...[]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		var recs [][]byte
		for i := rng.IntN(6); i > 0; i-- {
			r := make([]byte, rng.IntN(300))
			for j := range r {
				r[j] = byte(rng.Uint32())
			}
			recs = append(recs, r)
		}
		got, err := ReadAll(bytes.NewReader(encode(t, recs...)))
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if diff := cmp.Diff(recs, got, cmp.Comparer(bytes.Equal)); diff != "" {
			t.Fatalf("trial %d (-want +got):\n%s", trial, diff)
		}
	}
}

// The framing is pinned byte by byte, not only through our own writer.
func TestFramingByHand(t *testing.T) {
	data := []byte("hello")
	var want []byte
	want = binary.LittleEndian.AppendUint64(want, 5)
	want = binary.LittleEndian.AppendUint32(want, MaskedCRC(want[:8]))
	want = append(want, data...)
	want = binary.LittleEndian.AppendUint32(want, MaskedCRC(data))
	if got := encode(t, data); !bytes.Equal(got, want) {
		t.Fatalf("framing = %x, want %x", got, want)
	}
}

func TestBadInput(t *testing.T) {
	good := encode(t, []byte("first record"), []byte("second"))
	second := 16 + len("first record") // offset of the second record
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	tests := []struct {
		name   string
		in     []byte
		want   error
		index  int
		offset int64
		ok     int // records read before the error
	}{
		// A flipped bit in the first record's length breaks its length CRC.
		{"length CRC", flip(0), ErrChecksum, 0, 0, 0},
		// A flipped bit in the second record's data breaks its data CRC.
		{"data CRC", flip(second + 12), ErrChecksum, 1, int64(second), 1},
		// A flipped bit in the stored data CRC itself.
		{"stored data CRC", flip(len(good) - 1), ErrChecksum, 1, int64(second), 1},
		// The file ends inside the second record's header.
		{"truncated header", good[:second+5], ErrTruncated, 1, int64(second), 1},
		// The file ends inside the second record's data.
		{"truncated data", good[:second+14], ErrTruncated, 1, int64(second), 1},
		// The file ends inside the second record's trailing CRC.
		{"truncated footer", good[:len(good)-2], ErrTruncated, 1, int64(second), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := ReadAll(bytes.NewReader(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("err %T is not a *RecordError", err)
			}
			if re.Index != tt.index || re.Offset != tt.offset {
				t.Errorf("record %d at %d, want %d at %d", re.Index, re.Offset, tt.index, tt.offset)
			}
			if len(recs) != tt.ok {
				t.Errorf("%d records before the error, want %d", len(recs), tt.ok)
			}
		})
	}
}

func TestLengthLimit(t *testing.T) {
	r := NewReader(bytes.NewReader(encode(t, make([]byte, 100))))
	r.MaxRecord = 99
	if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestEmpty(t *testing.T) {
	if _, err := NewReader(bytes.NewReader(nil)).Next(); err != io.EOF {
		t.Fatalf("empty input: err = %v, want io.EOF", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(encode(f, []byte("a"), []byte("bc")))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		r.MaxRecord = 1 << 20
		var n int
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var re *RecordError
				if !errors.As(err, &re) || re.Index != n {
					t.Fatalf("error %v does not name record %d", err, n)
				}
				return
			}
			// Whatever decoded must re-encode to the same bytes.
			var b bytes.Buffer
			_ = NewWriter(&b).Write(rec)
			off := 0
			for i := 0; i < n; i++ {
				off += 16 + int(binary.LittleEndian.Uint64(in[off:]))
			}
			if !bytes.Equal(b.Bytes(), in[off:off+b.Len()]) {
				t.Fatalf("record %d does not re-encode to its input bytes", n)
			}
			n++
		}
	})
}
