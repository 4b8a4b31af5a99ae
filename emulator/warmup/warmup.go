package warmup

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/batchtune/batchtune/tfserving"
)

// Write writes reqs to w as a warmup file, one PredictionLog record each.
func Write(w io.Writer, reqs []*tfserving.PredictRequest) error {
	tw := NewWriter(w)
	for i, req := range reqs {
		rec := &tfserving.PredictionLog{LogType: &tfserving.PredictionLog_PredictLog{
			PredictLog: &tfserving.PredictLog{Request: req},
		}}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rec)
		if err != nil {
			return fmt.Errorf("warmup: request %d: %w", i, err)
		}
		if err := tw.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// Read returns every request of the warmup file on r, in file order.
func Read(r io.Reader) ([]*tfserving.PredictRequest, error) {
	tr := NewReader(r)
	var reqs []*tfserving.PredictRequest
	for i := 0; ; i++ {
		b, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return reqs, nil
		}
		if err != nil {
			return nil, err
		}
		var rec tfserving.PredictionLog
		if err := proto.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, err)
		}
		pl := rec.GetPredictLog()
		if pl == nil || pl.GetRequest() == nil {
			return nil, fmt.Errorf("%w: record %d", ErrNotPredict, i)
		}
		reqs = append(reqs, pl.GetRequest())
	}
}
