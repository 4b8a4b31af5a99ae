package warmup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/batchtune/batchtune/tfserving"
)

// TestFrameBytes pins the frame layout against bytes built by hand from the
// format's definition, with the CRC computed independently of maskedCRC.
func TestFrameBytes(t *testing.T) {
	mask := func(b []byte) uint32 {
		c := crc32.Update(0, crc32.MakeTable(0x82f63b78), b)
		return ((c >> 15) | (c << 17)) + 0xa282ead8
	}
	data := []byte("hello")
	var want []byte
	want = binary.LittleEndian.AppendUint64(want, 5)
	want = binary.LittleEndian.AppendUint32(want, mask(want[:8]))
	want = append(want, data...)
	want = binary.LittleEndian.AppendUint32(want, mask(data))

	var buf bytes.Buffer
	if err := NewWriter(&buf).Write(data); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, buf.Bytes()); diff != "" {
		t.Errorf("frame bytes (-want +got)\n%s", diff)
	}
	// Known answer: CRC-32C("123456789") is 0xe3069283.
	if c := crc32.Checksum([]byte("123456789"), castagnoli); c != 0xe3069283 {
		t.Errorf("crc32c check value = %#x, want 0xe3069283", c)
	}
}

func request(name string, rows int, seed uint64) *tfserving.PredictRequest {
	r := rand.New(rand.NewPCG(seed, 1))
	vals := make([]float32, rows*3)
	for i := range vals {
		vals[i] = r.Float32()
	}
	return &tfserving.PredictRequest{
		ModelSpec: &tfserving.ModelSpec{Name: name, SignatureName: "serving_default"},
		Inputs: map[string]*tfserving.TensorProto{"x": {
			Dtype:       tfserving.DataType_DT_FLOAT,
			TensorShape: &tfserving.TensorShapeProto{Dim: []*tfserving.TensorShapeProto_Dim{{Size: int64(rows)}, {Size: 3}}},
			FloatVal:    vals,
		}},
	}
}

// TestRoundTrip: Read(Write(reqs)) == reqs for several request lists.
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		reqs []*tfserving.PredictRequest
	}{
		{"empty file", nil}, // no records at all
		{"one request", []*tfserving.PredictRequest{request("m", 1, 1)}},                                            // the minimum
		{"several sizes", []*tfserving.PredictRequest{request("m", 1, 1), request("m", 8, 2), request("m", 64, 3)}}, // typical warmup
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := Write(&buf, tt.reqs); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got, err := Read(&buf)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.reqs, got, protocmp.Transform()); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tt.name, diff)
		}
	}
}

// TestRecordIsPredictionLog pins that a record is a PredictionLog with the
// request at predict_log=6 → request=1, decoded field by field.
func TestRecordIsPredictionLog(t *testing.T) {
	req := request("m", 2, 7)
	var buf bytes.Buffer
	if err := Write(&buf, []*tfserving.PredictRequest{req}); err != nil {
		t.Fatal(err)
	}
	rec, err := NewReader(&buf).Next()
	if err != nil {
		t.Fatal(err)
	}
	num, typ, n := protowire.ConsumeTag(rec)
	if num != 6 || typ != protowire.BytesType {
		t.Fatalf("outer field %d type %d, want predict_log=6 bytes", num, typ)
	}
	inner, _ := protowire.ConsumeBytes(rec[n:])
	num, typ, n = protowire.ConsumeTag(inner)
	if num != 1 || typ != protowire.BytesType {
		t.Fatalf("predict_log field %d type %d, want request=1 bytes", num, typ)
	}
	reqBytes, _ := protowire.ConsumeBytes(inner[n:])
	var got tfserving.PredictRequest
	if err := proto.Unmarshal(reqBytes, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(req, &got, protocmp.Transform()); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestReadErrors(t *testing.T) {
	var good bytes.Buffer
	if err := Write(&good, []*tfserving.PredictRequest{request("m", 1, 1), request("m", 2, 2)}); err != nil {
		t.Fatal(err)
	}
	b := good.Bytes()
	flip := func(i int) []byte {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		return c
	}
	var other bytes.Buffer
	_ = NewWriter(&other).Write([]byte{}) // an empty PredictionLog: no predict_log
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"length bit flipped", flip(0), ErrCorrupt},                        // header CRC catches it
		{"length crc flipped", flip(9), ErrCorrupt},                        // header CRC itself damaged
		{"data bit flipped", flip(20), ErrCorrupt},                         // data CRC catches it
		{"cut in header", b[:6], ErrTruncated},                             // file ends mid-header
		{"cut in data", b[:30], ErrTruncated},                              // file ends mid-record
		{"cut in second record", b[:len(b)-3], ErrTruncated},               // first record fine, second cut
		{"not a predict log", other.Bytes(), ErrNotPredict},                // some other PredictionLog kind
		{"huge length", hugeLength(), ErrTooLarge},                         // corrupt-but-checksummed length
		{"garbage protobuf", framed([]byte{0xff, 0xff, 0xff}), ErrCorrupt}, // framing fine, payload not a message
	}
	for _, tt := range tests {
		_, err := Read(bytes.NewReader(tt.in))
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: Read error %v, want %v", tt.name, err, tt.want)
		}
	}
}

func framed(data []byte) []byte {
	var buf bytes.Buffer
	_ = NewWriter(&buf).Write(data)
	return buf.Bytes()
}

func hugeLength() []byte {
	var hdr []byte
	hdr = binary.LittleEndian.AppendUint64(hdr, MaxRecord+1)
	hdr = binary.LittleEndian.AppendUint32(hdr, maskedCRC(hdr))
	return hdr
}

// FuzzReader: no input makes the reader panic or loop, and whatever it
// accepts re-encodes to the same bytes.
func FuzzReader(f *testing.F) {
	var good bytes.Buffer
	_ = Write(&good, []*tfserving.PredictRequest{request("m", 1, 1)})
	f.Add(good.Bytes())
	f.Add([]byte{})
	f.Add(hugeLength())
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		var out bytes.Buffer
		w := NewWriter(&out)
		for {
			rec, err := r.Next()
			if err == io.EOF {
				if !bytes.Equal(out.Bytes(), in) {
					t.Fatalf("accepted input does not re-encode to itself")
				}
				return
			}
			if err != nil {
				return
			}
			_ = w.Write(rec)
		}
	})
}
