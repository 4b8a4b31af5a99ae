package store_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/batchtune/batchtune/store"
	"github.com/batchtune/batchtune/store/storetest"
)

// measurement is a probe result of a realistic size (about 8 KB of JSON).
var measurement = json.RawMessage(`{"windows":[` + strings.Repeat(`{"qps":812.5,"p50":0.011,"p99":0.041,"errors":{}},`, 160) + `{"qps":1}]}`)

// BenchmarkPutTrial is the cost of one trial state change: open the bbolt
// file, one synced write transaction, close.
func BenchmarkPutTrial(b *testing.B) {
	db := storetest.Open(b)
	r := &store.Run{Study: "s", Kind: store.KindOneShot}
	if err := db.PutStudy(ctx, &store.Study{Name: "s"}); err != nil {
		b.Fatal(err)
	}
	if err := db.CreateRun(ctx, r); err != nil {
		b.Fatal(err)
	}
	tr := &store.Trial{Study: "s", Run: r.ID, State: store.TrialMeasuring, Config: []store.Param{{Name: "max_batch_size", Value: 8}}}
	if err := db.AddTrial(ctx, tr); err != nil {
		b.Fatal(err)
	}
	tr.Measurement = measurement
	b.ResetTimer()
	for b.Loop() {
		if err := db.PutTrial(ctx, tr); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrials lists a run of 500 trials with their measurements, as
// batchtune trials does.
func BenchmarkTrials(b *testing.B) {
	db := storetest.Open(b)
	r := &store.Run{Study: "s", Kind: store.KindOneShot}
	if err := db.PutStudy(ctx, &store.Study{Name: "s"}); err != nil {
		b.Fatal(err)
	}
	if err := db.CreateRun(ctx, r); err != nil {
		b.Fatal(err)
	}
	for range 500 {
		tr := &store.Trial{Study: "s", Run: r.ID, State: store.TrialSucceeded, Config: []store.Param{{Name: "max_batch_size", Value: 8}}, Measurement: measurement}
		tr.Phases = []store.Phase{{State: store.TrialSucceeded, At: time.Now()}}
		if err := db.AddTrial(ctx, tr); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		ts, err := db.Trials(ctx, "s", r.ID)
		if err != nil || len(ts) != 500 {
			b.Fatal(len(ts), err)
		}
	}
}

// BenchmarkBoltHeldOpen is the comparison point for BenchmarkPutTrial: the
// same value written by a bbolt handle held open between transactions, as
// a store that kept its file open would. The difference is what opening
// the file per transaction costs (it buys readers in other processes).
func BenchmarkBoltHeldOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "b.db")
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bdb.Close()
	v, err := json.Marshal(store.Trial{Study: "s", Run: 1, Seq: 1, State: store.TrialMeasuring, Measurement: measurement})
	if err != nil {
		b.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("t")); return err }); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("t")).Put([]byte("k"), v) }); err != nil {
			b.Fatal(err)
		}
	}
}
