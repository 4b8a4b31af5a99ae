package sched

import (
	"fmt"
	"sync"
	"time"
)

// Options are a queue's batching parameters, the fields of TF Serving's
// BatchingParameters that shape scheduling, resolved (no unset values).
type Options struct {
	// MaxBatchSize is the largest task accepted (TF's
	// input_batch_size_limit) and, without splitting, the largest batch.
	MaxBatchSize int
	// BatchTimeout is how long the oldest task of an open batch may wait
	// for the batch to fill before a free batch thread takes it anyway.
	// Zero: a free thread takes any non-empty batch at once.
	BatchTimeout time.Duration
	// NumBatchThreads is how many batches execute at once.
	NumBatchThreads int
	// MaxEnqueuedBatches bounds the batches waiting in the queue, the open
	// one included; a task that needs one more gets ErrQueueFull.
	MaxEnqueuedBatches int
	// AllowedBatchSizes, if set, are the sizes a batch is padded up to:
	// increasing, the last equal to the largest execution batch.
	AllowedBatchSizes []int
	// EnableLargeBatchSplitting lets a task be cut into pieces spread
	// over several batches of at most MaxExecutionBatchSize.
	EnableLargeBatchSplitting bool
	// MaxExecutionBatchSize is the largest executed batch with splitting;
	// ignored (MaxBatchSize is used) without it.
	MaxExecutionBatchSize int
}

// execLimit is the largest batch that is executed.
func (o Options) execLimit() int {
	if o.EnableLargeBatchSplitting && o.MaxExecutionBatchSize > 0 {
		return o.MaxExecutionBatchSize
	}
	return o.MaxBatchSize
}

// Validate reports the first invalid option, wrapping ErrOptions.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...)
	}
	switch {
	case o.MaxBatchSize <= 0:
		return bad("max_batch_size must be positive, got %d", o.MaxBatchSize)
	case o.BatchTimeout < 0:
		return bad("batch_timeout must not be negative, got %v", o.BatchTimeout)
	case o.NumBatchThreads <= 0:
		return bad("num_batch_threads must be positive, got %d", o.NumBatchThreads)
	case o.MaxEnqueuedBatches <= 0:
		return bad("max_enqueued_batches must be positive, got %d", o.MaxEnqueuedBatches)
	case o.EnableLargeBatchSplitting && (o.MaxExecutionBatchSize <= 0 || o.MaxExecutionBatchSize > o.MaxBatchSize):
		return bad("max_execution_batch_size must be in [1, max_batch_size=%d], got %d", o.MaxBatchSize, o.MaxExecutionBatchSize)
	}
	for i, s := range o.AllowedBatchSizes {
		if s <= 0 || (i > 0 && s <= o.AllowedBatchSizes[i-1]) {
			return bad("allowed_batch_sizes must be positive and increasing, got %v", o.AllowedBatchSizes)
		}
	}
	if n := len(o.AllowedBatchSizes); n > 0 && o.AllowedBatchSizes[n-1] != o.execLimit() {
		return bad("last allowed_batch_sizes entry must be %d, got %d", o.execLimit(), o.AllowedBatchSizes[n-1])
	}
	return nil
}

// PaddedSize returns the smallest allowed batch size >= n (n itself when no
// sizes are set), TF's RoundToLowestAllowedBatchSize.
func (o Options) PaddedSize(n int) int {
	for _, s := range o.AllowedBatchSizes {
		if s >= n {
			return s
		}
	}
	return n
}

// Task is one request's share of work: Size rows along the batch dimension.
// The caller fills Size, Deadline, Payload and Done; the scheduler owns the
// rest. A Task must not be submitted twice.
type Task struct {
	// Size is the task's batch dimension (rows).
	Size int
	// Deadline, if not zero, is when the caller stops waiting. A batch all
	// of whose tasks are past their deadlines when a batch thread takes it
	// is not executed: its tasks fail with ErrExpired.
	Deadline time.Time
	// Payload is the executor's data (the request's tensors); the
	// scheduler never looks at it.
	Payload any
	// Done is called exactly once, after every piece of the task has been
	// executed (err nil) or when the task failed (the first error). It is
	// not called when Submit returns an error.
	Done func(err error)

	enqueued time.Time
	pending  int // pieces not yet finished; guarded by Scheduler.mu
	err      error
}

// Enqueued returns when the task was accepted by Submit.
func (t *Task) Enqueued() time.Time { return t.enqueued }

// Piece is the rows [Offset, Offset+Size) of a task that travel in one
// batch. Without splitting a piece is the whole task.
type Piece struct {
	Task   *Task
	Offset int
	Size   int
}

// Batch is the unit of execution.
type Batch struct {
	// Pieces in arrival order.
	Pieces []Piece
	// Size is the number of real rows, the sum of the pieces' sizes.
	Size int
	// Padded is Size rounded up to the next allowed batch size; the
	// executor runs Padded rows (set when a batch thread takes the batch).
	Padded int
	// Opened is when the first piece joined; Started when a batch thread
	// took the batch.
	Opened, Started time.Time

	full     bool // no further piece may join
	finished bool
}

// Padding is the number of padding rows, Padded - Size.
func (b *Batch) Padding() int { return b.Padded - b.Size }

// Executor runs batches. Execute must not block: it starts the work (on a
// goroutine, or as a virtual-time event) and calls done exactly once when
// the batch has finished, with nil or the error that fails all its tasks.
type Executor interface {
	Execute(b *Batch, done func(err error))
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(b *Batch, done func(err error))

// Execute calls f.
func (f ExecutorFunc) Execute(b *Batch, done func(err error)) { f(b, done) }

// Stats is a snapshot of a scheduler's state.
type Stats struct {
	QueuedBatches int // batches in the queue, the open one included if non-empty
	QueuedRows    int // rows waiting in the queue
	Running       int // batches handed to the executor and not yet done
}

// Scheduler is one batching queue with its batch threads. Safe for
// concurrent use.
type Scheduler struct {
	clock Clock
	exec  Executor
	opts  Options

	mu      sync.Mutex
	queue   []*Batch // never empty: the last batch is the open one
	idle    int      // free batch threads
	running int
	closed  bool
	timer   Timer
	timerAt time.Time
}

// New returns a scheduler that reads time from clock and executes batches
// on exec.
func New(clock Clock, exec Executor, opts Options) (*Scheduler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if clock == nil || exec == nil {
		return nil, fmt.Errorf("%w: clock and executor are required", ErrOptions)
	}
	opts.AllowedBatchSizes = append([]int(nil), opts.AllowedBatchSizes...)
	return &Scheduler{
		clock: clock,
		exec:  exec,
		opts:  opts,
		queue: []*Batch{{}},
		idle:  opts.NumBatchThreads,
	}, nil
}

// Options returns the scheduler's options.
func (s *Scheduler) Options() Options { return s.opts }

// Submit enqueues t. It returns at once: an error if the task is rejected
// (ErrEmptyTask, *SizeError, ErrQueueFull, ErrClosed), in which case Done
// will not be called, or nil, after which t.Done is called exactly once. A
// batch the task made schedulable may be handed to the executor before
// Submit returns.
func (s *Scheduler) Submit(t *Task) error {
	if t.Size <= 0 {
		return ErrEmptyTask
	}
	if t.Size > s.opts.MaxBatchSize {
		return &SizeError{Size: t.Size, Max: s.opts.MaxBatchSize}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	now := s.clock.Now()
	if err := s.enqueueLocked(t, now); err != nil {
		s.mu.Unlock()
		return err
	}
	a := s.dispatchLocked(now)
	s.mu.Unlock()
	s.act(a)
	return nil
}

// enqueueLocked adds t's rows to the open batch and, when they do not fit,
// to new batches, checking the queue bound first so that a rejected task
// leaves the queue untouched.
func (s *Scheduler) enqueueLocked(t *Task, now time.Time) error {
	limit := s.opts.execLimit()
	open := s.queue[len(s.queue)-1]
	room := limit - open.Size
	if open.full {
		room = 0
	}
	if !s.opts.EnableLargeBatchSplitting {
		if t.Size > room {
			if len(s.queue) >= s.opts.MaxEnqueuedBatches {
				return ErrQueueFull
			}
			open.full = true
			open = &Batch{}
			s.queue = append(s.queue, open)
		}
		t.enqueued, t.pending = now, 1
		s.addLocked(open, Piece{Task: t, Size: t.Size}, now)
		return nil
	}
	first := min(room, t.Size)
	extra := (t.Size - first + limit - 1) / limit
	if len(s.queue)+extra > s.opts.MaxEnqueuedBatches {
		return ErrQueueFull
	}
	t.enqueued, t.pending = now, 0
	off := 0
	if first > 0 {
		t.pending++
		s.addLocked(open, Piece{Task: t, Size: first}, now)
		off = first
	}
	for off < t.Size {
		open.full = true
		open = &Batch{}
		s.queue = append(s.queue, open)
		n := min(limit, t.Size-off)
		t.pending++
		s.addLocked(open, Piece{Task: t, Offset: off, Size: n}, now)
		off += n
	}
	return nil
}

func (s *Scheduler) addLocked(b *Batch, p Piece, now time.Time) {
	if len(b.Pieces) == 0 {
		b.Opened = now
	}
	b.Pieces = append(b.Pieces, p)
	b.Size += p.Size
	if b.Size >= s.opts.execLimit() {
		b.full = true
	}
}

// schedulableLocked reports whether a free batch thread may take b, the
// front of the queue: it is full or closed behind by a newer batch, or its
// oldest task has waited the batch timeout.
func (s *Scheduler) schedulableLocked(b *Batch, now time.Time) bool {
	if b.Size == 0 {
		return false
	}
	if b.full || b != s.queue[len(s.queue)-1] {
		return true
	}
	return !now.Before(b.Opened.Add(s.opts.BatchTimeout))
}

// actions are what a state change asks for, carried out after the lock is
// released so that executors and callbacks may re-enter the scheduler.
type actions struct {
	start   []*Batch
	expired []*Batch
}

func (s *Scheduler) dispatchLocked(now time.Time) actions {
	var a actions
	for s.idle > 0 && s.schedulableLocked(s.queue[0], now) {
		b := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if len(s.queue) == 0 {
			s.queue = append(s.queue, &Batch{})
		}
		b.full = true
		b.Started = now
		b.Padded = s.opts.PaddedSize(b.Size)
		if allExpired(b, now) {
			a.expired = append(a.expired, b)
			continue
		}
		s.idle--
		s.running++
		a.start = append(a.start, b)
	}
	s.armLocked(now)
	return a
}

// armLocked keeps one timer pending for the moment the front batch times
// out, when that is the next thing that could start a batch: a thread is
// free and the front batch is open, non-empty and not yet due.
func (s *Scheduler) armLocked(now time.Time) {
	var at time.Time
	if front := s.queue[0]; s.idle > 0 && front.Size > 0 && !s.schedulableLocked(front, now) {
		at = front.Opened.Add(s.opts.BatchTimeout)
	}
	if s.timer != nil && !at.Equal(s.timerAt) {
		s.timer.Stop()
		s.timer = nil
	}
	if at.IsZero() || s.timer != nil {
		return
	}
	s.timerAt = at
	s.timer = s.clock.AfterFunc(at.Sub(now), s.onTimer)
}

func (s *Scheduler) onTimer() {
	s.mu.Lock()
	s.timer = nil
	a := s.dispatchLocked(s.clock.Now())
	s.mu.Unlock()
	s.act(a)
}

func allExpired(b *Batch, now time.Time) bool {
	for _, p := range b.Pieces {
		if p.Task.Deadline.IsZero() || p.Task.Deadline.After(now) {
			return false
		}
	}
	return true
}

func (s *Scheduler) act(a actions) {
	for _, b := range a.expired {
		s.finish(b, ErrExpired)
	}
	for _, b := range a.start {
		s.exec.Execute(b, s.doneFunc(b))
	}
}

func (s *Scheduler) doneFunc(b *Batch) func(error) {
	return func(err error) {
		s.mu.Lock()
		if b.finished {
			s.mu.Unlock()
			return // a second call is ignored
		}
		b.finished = true
		s.idle++
		s.running--
		a := s.dispatchLocked(s.clock.Now())
		s.mu.Unlock()
		s.finish(b, err)
		s.act(a)
	}
}

// finish records b's outcome on its tasks and calls Done for every task
// whose last piece this was.
func (s *Scheduler) finish(b *Batch, err error) {
	var done []*Task
	s.mu.Lock()
	b.finished = true // already set by doneFunc; expired batches never ran
	for _, p := range b.Pieces {
		t := p.Task
		if err != nil && t.err == nil {
			t.err = err
		}
		t.pending--
		if t.pending == 0 {
			done = append(done, t)
		}
	}
	s.mu.Unlock()
	for _, t := range done {
		if t.Done != nil {
			t.Done(t.err)
		}
	}
}

// Close stops accepting tasks; batches already queued still run (an open
// batch when it times out or a thread is free).
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// Stats returns a snapshot of the queue.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Running: s.running}
	for _, b := range s.queue {
		if b.Size > 0 {
			st.QueuedBatches++
			st.QueuedRows += b.Size
		}
	}
	return st
}
