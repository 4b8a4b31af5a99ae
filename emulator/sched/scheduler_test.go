package sched

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// ms is a virtual-time offset from t0 in milliseconds.
func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// run is what a virtual-time scenario records: each executed batch and each
// task's outcome, as offsets from t0.
type run struct {
	Batches []ranBatch
	Tasks   map[string]taskEnd
	Errors  map[string]string // Submit errors
}

type ranBatch struct {
	Start  time.Duration
	Tasks  []string // task names, with "[off:n]" for split pieces
	Size   int
	Padded int
}

type taskEnd struct {
	At  time.Duration
	Err string
}

// arrival is one task submitted at At.
type arrival struct {
	At       time.Duration
	Name     string
	Size     int
	Deadline time.Duration // relative to t0; 0: none
}

// simulate submits arrivals on a virtual clock to a scheduler whose executor
// takes cost(padded) per batch, runs to completion and returns what happened.
func simulate(t *testing.T, opts Options, cost func(padded int) time.Duration, arrivals []arrival) run {
	t.Helper()
	clk := NewVirtual(t0)
	got := run{Tasks: map[string]taskEnd{}, Errors: map[string]string{}}
	exec := ExecutorFunc(func(b *Batch, done func(error)) {
		rb := ranBatch{Start: b.Started.Sub(t0), Size: b.Size, Padded: b.Padded}
		for _, p := range b.Pieces {
			name := p.Task.Payload.(string)
			if p.Size != p.Task.Size {
				name += "[" + strconv.Itoa(p.Offset) + ":" + strconv.Itoa(p.Size) + "]"
			}
			rb.Tasks = append(rb.Tasks, name)
		}
		got.Batches = append(got.Batches, rb)
		clk.AfterFunc(cost(b.Padded), func() { done(nil) })
	})
	s, err := New(clk, exec, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range arrivals {
		clk.AfterFunc(a.At, func() {
			task := &Task{Size: a.Size, Payload: a.Name}
			if a.Deadline > 0 {
				task.Deadline = t0.Add(a.Deadline)
			}
			task.Done = func(err error) {
				e := taskEnd{At: clk.Now().Sub(t0)}
				if err != nil {
					e.Err = err.Error()
				}
				if _, dup := got.Tasks[a.Name]; dup {
					t.Errorf("task %s: Done called twice", a.Name)
				}
				got.Tasks[a.Name] = e
			}
			if err := s.Submit(task); err != nil {
				got.Errors[a.Name] = err.Error()
			}
		})
	}
	if n := clk.Run(100000); n == 100000 {
		t.Fatal("simulation did not settle")
	}
	if st := s.Stats(); st != (Stats{}) {
		t.Errorf("scheduler not drained: %+v", st)
	}
	return got
}

func fixed(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

func TestSchedulingRules(t *testing.T) {
	base := Options{MaxBatchSize: 4, BatchTimeout: ms(5), NumBatchThreads: 1, MaxEnqueuedBatches: 10}
	with := func(f func(o *Options)) Options {
		o := base
		f(&o)
		return o
	}
	tests := []struct {
		name     string
		opts     Options
		cost     func(int) time.Duration
		arrivals []arrival
		want     run
	}{
		{
			// A batch that reaches max_batch_size starts at once, long
			// before its timeout.
			name: "size close",
			opts: with(func(o *Options) { o.BatchTimeout = time.Second }),
			cost: fixed(ms(10)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 1}, {At: ms(1), Name: "b", Size: 2}, {At: ms(2), Name: "c", Size: 1},
			},
			want: run{
				Batches: []ranBatch{{Start: ms(2), Tasks: []string{"a", "b", "c"}, Size: 4, Padded: 4}},
				Tasks:   map[string]taskEnd{"a": {At: ms(12)}, "b": {At: ms(12)}, "c": {At: ms(12)}},
			},
		},
		{
			// A batch that does not fill starts when its oldest task has
			// waited the timeout: 5 ms after a, not after b.
			name: "timeout close from the oldest task",
			opts: base,
			cost: fixed(ms(1)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 1}, {At: ms(3), Name: "b", Size: 1},
			},
			want: run{
				Batches: []ranBatch{{Start: ms(5), Tasks: []string{"a", "b"}, Size: 2, Padded: 2}},
				Tasks:   map[string]taskEnd{"a": {At: ms(6)}, "b": {At: ms(6)}},
			},
		},
		{
			// A task that does not fit the open batch closes it and opens
			// the next; the closed batch is schedulable at once.
			name: "overflow closes the open batch",
			opts: with(func(o *Options) { o.BatchTimeout = time.Second }),
			cost: fixed(ms(1)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 3}, {At: ms(1), Name: "b", Size: 2},
			},
			want: run{
				Batches: []ranBatch{
					{Start: ms(1), Tasks: []string{"a"}, Size: 3, Padded: 3},
					{Start: ms(1001), Tasks: []string{"b"}, Size: 2, Padded: 2},
				},
				Tasks: map[string]taskEnd{"a": {At: ms(2)}, "b": {At: ms(1002)}},
			},
		},
		{
			// Timeout 0: a free thread takes whatever is there; while it is
			// busy, arrivals gather into the next batch.
			name: "zero timeout batches while the thread is busy",
			opts: with(func(o *Options) { o.BatchTimeout = 0 }),
			cost: fixed(ms(10)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 1}, {At: ms(1), Name: "b", Size: 1}, {At: ms(2), Name: "c", Size: 1},
			},
			want: run{
				Batches: []ranBatch{
					{Start: 0, Tasks: []string{"a"}, Size: 1, Padded: 1},
					{Start: ms(10), Tasks: []string{"b", "c"}, Size: 2, Padded: 2},
				},
				Tasks: map[string]taskEnd{"a": {At: ms(10)}, "b": {At: ms(20)}, "c": {At: ms(20)}},
			},
		},
		{
			// A timed-out batch keeps accepting tasks until a thread is
			// free to take it (TF closes a batch when a thread takes it).
			name: "timed-out batch fills while threads are busy",
			opts: with(func(o *Options) { o.BatchTimeout = ms(2) }),
			cost: fixed(ms(10)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 4}, {At: ms(1), Name: "b", Size: 1}, {At: ms(5), Name: "c", Size: 1},
			},
			want: run{
				Batches: []ranBatch{
					{Start: 0, Tasks: []string{"a"}, Size: 4, Padded: 4},
					{Start: ms(10), Tasks: []string{"b", "c"}, Size: 2, Padded: 2},
				},
				Tasks: map[string]taskEnd{"a": {At: ms(10)}, "b": {At: ms(20)}, "c": {At: ms(20)}},
			},
		},
		{
			// Two batch threads run two batches at once.
			name: "num_batch_threads in parallel",
			opts: with(func(o *Options) { o.BatchTimeout = 0; o.NumBatchThreads = 2 }),
			cost: fixed(ms(10)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 1}, {At: ms(1), Name: "b", Size: 1}, {At: ms(2), Name: "c", Size: 1},
			},
			want: run{
				Batches: []ranBatch{
					{Start: 0, Tasks: []string{"a"}, Size: 1, Padded: 1},
					{Start: ms(1), Tasks: []string{"b"}, Size: 1, Padded: 1},
					{Start: ms(10), Tasks: []string{"c"}, Size: 1, Padded: 1},
				},
				Tasks: map[string]taskEnd{"a": {At: ms(10)}, "b": {At: ms(11)}, "c": {At: ms(20)}},
			},
		},
		{
			// The queue holds max_enqueued_batches batches, the open one
			// included; a task needing one more is refused at once.
			name: "queue full",
			opts: with(func(o *Options) { o.MaxBatchSize = 1; o.MaxEnqueuedBatches = 2; o.BatchTimeout = 0 }),
			cost: fixed(ms(10)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 1}, {At: ms(1), Name: "b", Size: 1},
				{At: ms(2), Name: "c", Size: 1}, {At: ms(3), Name: "d", Size: 1},
			},
			want: run{
				Batches: []ranBatch{
					{Start: 0, Tasks: []string{"a"}, Size: 1, Padded: 1},
					{Start: ms(10), Tasks: []string{"b"}, Size: 1, Padded: 1},
					{Start: ms(20), Tasks: []string{"c"}, Size: 1, Padded: 1},
				},
				Tasks:  map[string]taskEnd{"a": {At: ms(10)}, "b": {At: ms(20)}, "c": {At: ms(30)}},
				Errors: map[string]string{"d": ErrQueueFull.Error()},
			},
		},
		{
			// Batches are padded up to the next allowed size.
			name: "padding to allowed_batch_sizes",
			opts: with(func(o *Options) { o.MaxBatchSize = 8; o.AllowedBatchSizes = []int{2, 4, 8} }),
			cost: func(p int) time.Duration { return ms(float64(p)) },
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 3},
			},
			want: run{
				Batches: []ranBatch{{Start: ms(5), Tasks: []string{"a"}, Size: 3, Padded: 4}},
				Tasks:   map[string]taskEnd{"a": {At: ms(9)}},
			},
		},
		{
			// A task larger than max_batch_size is refused.
			name:     "oversized task",
			opts:     base,
			cost:     fixed(ms(1)),
			arrivals: []arrival{{At: 0, Name: "a", Size: 5}},
			want: run{
				Tasks:  map[string]taskEnd{},
				Errors: map[string]string{"a": (&SizeError{Size: 5, Max: 4}).Error()},
			},
		},
		{
			// A batch whose every task is past its deadline when a thread
			// takes it is not executed.
			name: "deadline passed while queued",
			opts: with(func(o *Options) { o.BatchTimeout = 0 }),
			cost: fixed(ms(10)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 1}, {At: ms(1), Name: "b", Size: 1, Deadline: ms(5)},
				{At: ms(12), Name: "c", Size: 1, Deadline: ms(100)},
			},
			want: run{
				Batches: []ranBatch{
					{Start: 0, Tasks: []string{"a"}, Size: 1, Padded: 1},
					{Start: ms(12), Tasks: []string{"c"}, Size: 1, Padded: 1},
				},
				Tasks: map[string]taskEnd{
					"a": {At: ms(10)}, "b": {At: ms(10), Err: ErrExpired.Error()}, "c": {At: ms(22)},
				},
			},
		},
		{
			// One live task keeps a batch alive: TF only drops a batch when
			// all its tasks have expired.
			name: "one live task runs the batch",
			opts: with(func(o *Options) { o.BatchTimeout = 0 }),
			cost: fixed(ms(10)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 1}, {At: ms(1), Name: "b", Size: 1, Deadline: ms(5)},
				{At: ms(2), Name: "c", Size: 1},
			},
			want: run{
				Batches: []ranBatch{
					{Start: 0, Tasks: []string{"a"}, Size: 1, Padded: 1},
					{Start: ms(10), Tasks: []string{"b", "c"}, Size: 2, Padded: 2},
				},
				Tasks: map[string]taskEnd{"a": {At: ms(10)}, "b": {At: ms(20)}, "c": {At: ms(20)}},
			},
		},
		{
			// With splitting, a large task fills the open batch and new
			// batches of max_execution_batch_size; it is done when its
			// last piece is.
			name: "large batch splitting",
			opts: with(func(o *Options) {
				o.MaxBatchSize = 10
				o.EnableLargeBatchSplitting = true
				o.MaxExecutionBatchSize = 4
				o.BatchTimeout = ms(5)
			}),
			cost: fixed(ms(10)),
			arrivals: []arrival{
				{At: 0, Name: "a", Size: 1}, {At: ms(1), Name: "b", Size: 9},
			},
			want: run{
				Batches: []ranBatch{
					{Start: ms(1), Tasks: []string{"a", "b[0:3]"}, Size: 4, Padded: 4},
					{Start: ms(11), Tasks: []string{"b[3:4]"}, Size: 4, Padded: 4},
					{Start: ms(21), Tasks: []string{"b[7:2]"}, Size: 2, Padded: 2},
				},
				Tasks: map[string]taskEnd{"a": {At: ms(11)}, "b": {At: ms(31)}},
			},
		},
		{
			// With splitting, a task whose pieces need more batches than the
			// queue has room for is refused whole.
			name: "splitting respects the queue bound",
			opts: with(func(o *Options) {
				o.MaxBatchSize = 10
				o.EnableLargeBatchSplitting = true
				o.MaxExecutionBatchSize = 4
				o.MaxEnqueuedBatches = 2
			}),
			cost:     fixed(ms(10)),
			arrivals: []arrival{{At: 0, Name: "a", Size: 9}},
			want: run{
				Tasks:  map[string]taskEnd{},
				Errors: map[string]string{"a": ErrQueueFull.Error()},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := simulate(t, tt.opts, tt.cost, tt.arrivals)
			if tt.want.Errors == nil {
				tt.want.Errors = map[string]string{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{MaxBatchSize: 8, NumBatchThreads: 1, MaxEnqueuedBatches: 1}
	tests := []struct {
		name string
		mod  func(o *Options)
		bad  bool
	}{
		{"valid", func(o *Options) {}, false},                                                       // the minimum
		{"zero max batch", func(o *Options) { o.MaxBatchSize = 0 }, true},                           // nothing fits
		{"negative timeout", func(o *Options) { o.BatchTimeout = -1 }, true},                        // TF refuses
		{"no threads", func(o *Options) { o.NumBatchThreads = 0 }, true},                            // nothing runs
		{"no queue", func(o *Options) { o.MaxEnqueuedBatches = 0 }, true},                           // nothing is accepted
		{"allowed sizes end at max", func(o *Options) { o.AllowedBatchSizes = []int{2, 8} }, false}, // TF's rule
		{"allowed sizes short of max", func(o *Options) { o.AllowedBatchSizes = []int{2, 4} }, true},
		{"allowed sizes not increasing", func(o *Options) { o.AllowedBatchSizes = []int{4, 2, 8} }, true},
		{"split exec size too big", func(o *Options) { o.EnableLargeBatchSplitting = true; o.MaxExecutionBatchSize = 9 }, true},
		{"split allowed sizes end at exec size", func(o *Options) {
			o.EnableLargeBatchSplitting = true
			o.MaxExecutionBatchSize = 4
			o.AllowedBatchSizes = []int{2, 4}
		}, false},
	}
	for _, tt := range tests {
		o := ok
		tt.mod(&o)
		err := o.Validate()
		if (err != nil) != tt.bad {
			t.Errorf("%s: Validate() = %v, want error %v", tt.name, err, tt.bad)
		}
		if err != nil && !errors.Is(err, ErrOptions) {
			t.Errorf("%s: error %v does not wrap ErrOptions", tt.name, err)
		}
	}
}

func TestDoneTwiceIgnored(t *testing.T) {
	clk := NewVirtual(t0)
	var calls int
	s, err := New(clk, ExecutorFunc(func(b *Batch, done func(error)) {
		done(nil)
		done(errors.New("late"))
	}), Options{MaxBatchSize: 1, NumBatchThreads: 1, MaxEnqueuedBatches: 1})
	if err != nil {
		t.Fatal(err)
	}
	var gotErr error
	if err := s.Submit(&Task{Size: 1, Done: func(err error) { calls++; gotErr = err }}); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || gotErr != nil {
		t.Errorf("Done called %d times with %v, want once with nil", calls, gotErr)
	}
	// The slot was freed once: a second task still runs.
	if err := s.Submit(&Task{Size: 1, Done: func(error) { calls++ }}); err != nil || calls != 2 {
		t.Errorf("second task: err %v, calls %d", err, calls)
	}
}

func TestExecutorErrorFailsTasks(t *testing.T) {
	clk := NewVirtual(t0)
	boom := errors.New("boom")
	s, _ := New(clk, ExecutorFunc(func(b *Batch, done func(error)) { done(boom) }),
		Options{MaxBatchSize: 2, NumBatchThreads: 1, MaxEnqueuedBatches: 1})
	var got error
	_ = s.Submit(&Task{Size: 1, Done: func(err error) { got = err }})
	if !errors.Is(got, boom) {
		t.Errorf("Done(%v), want %v", got, boom)
	}
}

func TestClosedRefuses(t *testing.T) {
	clk := NewVirtual(t0)
	var ran int
	s, _ := New(clk, ExecutorFunc(func(b *Batch, done func(error)) { ran += b.Size; done(nil) }),
		Options{MaxBatchSize: 4, BatchTimeout: ms(5), NumBatchThreads: 1, MaxEnqueuedBatches: 2})
	if err := s.Submit(&Task{Size: 1}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Submit(&Task{Size: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
	clk.Run(0)
	if ran != 1 {
		t.Errorf("queued rows run after Close = %d, want 1 (the queue drains)", ran)
	}
}

// TestRealClock runs the scheduler on the wall clock: the timeout must hold
// a lone task back at least the timeout (a lower bound the timer
// guarantees), and the task must finish.
func TestRealClock(t *testing.T) {
	exec := ExecutorFunc(func(b *Batch, done func(error)) { go done(nil) })
	s, err := New(Real(), exec, Options{MaxBatchSize: 8, BatchTimeout: 30 * time.Millisecond, NumBatchThreads: 1, MaxEnqueuedBatches: 1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	var waited time.Duration
	if err := s.Submit(&Task{Size: 1, Done: func(error) { waited = time.Since(start); wg.Done() }}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if waited < 30*time.Millisecond {
		t.Errorf("task finished after %v, before the 30ms batch timeout", waited)
	}
}

// TestConcurrentSubmit hammers the scheduler from many goroutines on the
// wall clock (run with -race) and checks every accepted task finishes once
// and every row is executed once.
func TestConcurrentSubmit(t *testing.T) {
	var mu sync.Mutex
	rows := 0
	exec := ExecutorFunc(func(b *Batch, done func(error)) {
		go func() {
			mu.Lock()
			rows += b.Size
			mu.Unlock()
			done(nil)
		}()
	})
	s, _ := New(Real(), exec, Options{MaxBatchSize: 16, BatchTimeout: 100 * time.Microsecond, NumBatchThreads: 3, MaxEnqueuedBatches: 1000})
	var wg sync.WaitGroup
	var doneCount, accepted int
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				var once sync.WaitGroup
				once.Add(1)
				err := s.Submit(&Task{Size: 1 + i%3, Done: func(error) {
					mu.Lock()
					doneCount++
					mu.Unlock()
					once.Done()
				}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				accepted += 1 + i%3
				mu.Unlock()
				once.Wait()
			}
		}()
	}
	wg.Wait()
	if doneCount != 1600 || rows != accepted {
		t.Errorf("done %d tasks (want 1600), executed %d rows (want %d)", doneCount, rows, accepted)
	}
}
