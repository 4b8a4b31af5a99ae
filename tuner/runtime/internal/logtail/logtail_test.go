package logtail

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		writes []string
		n      int
		want   string
	}{
		// Nothing written, nothing to say.
		{"empty", 16, nil, 3, ""},
		// Fewer lines than asked for: all of them, no trailing newline.
		{"short", 64, []string{"a\nb\n"}, 3, "a\nb"},
		// More lines than asked for: the last n.
		{"last n", 64, []string{"1\n2\n3\n4\n"}, 2, "3\n4"},
		// Lines split over writes are joined.
		{"split writes", 64, []string{"hel", "lo\nwor", "ld\n"}, 5, "hello\nworld"},
		// After wrapping, the partial oldest line is dropped.
		{"wrapped", 10, []string{"aaaa\nbbbb\ncccc\n"}, 5, "cccc"},
		// A write larger than the ring keeps its end.
		{"huge write", 8, []string{strings.Repeat("x", 100) + "\nend\n"}, 5, "end"},
		// A final line without a newline still counts.
		{"unterminated", 64, []string{"one\ntwo"}, 1, "two"},
		// Wrapping exactly at the end of the buffer.
		{"exact wrap", 8, []string{"abc\n", "def\n", "gh\n"}, 5, "def\ngh"},
		// n <= 0 asks for nothing.
		{"zero", 64, []string{"a\n"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.size)
			total := 0
			for _, w := range tt.writes {
				n, err := r.Write([]byte(w))
				if err != nil || n != len(w) {
					t.Fatalf("Write: %d, %v", n, err)
				}
				total += n
			}
			if diff := cmp.Diff(tt.want, r.Tail(tt.n)); diff != "" {
				t.Errorf("Tail (-want +got):\n%s", diff)
			}
			if r.Written() != int64(total) {
				t.Errorf("Written: got %d, want %d", r.Written(), total)
			}
			if got := len(r.Bytes()); got > tt.size {
				t.Errorf("ring holds %d bytes, more than its size %d", got, tt.size)
			}
		})
	}
}

// TestRingKeepsSuffix: whatever is written, in whatever pieces, the ring
// holds exactly the last size bytes.
func TestRingKeepsSuffix(t *testing.T) {
	var all []byte
	r := New(37)
	for i := range 200 {
		piece := []byte(strings.Repeat(string(rune('a'+i%26)), i%53))
		r.Write(piece)
		all = append(all, piece...)
		want := all
		if len(want) > 37 {
			want = want[len(want)-37:]
		}
		if diff := cmp.Diff(string(want), string(r.Bytes())); diff != "" {
			t.Fatalf("after write %d (-want +got):\n%s", i, diff)
		}
	}
}
