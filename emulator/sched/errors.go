package sched

import (
	"errors"
	"fmt"
)

var (
	// ErrQueueFull: the task needed a new batch but the queue already holds
	// Options.MaxEnqueuedBatches batches. TF Serving answers UNAVAILABLE
	// "The batch scheduling queue to which this task was submitted is full".
	ErrQueueFull = errors.New("sched: the batch scheduling queue to which this task was submitted is full")
	// ErrTaskTooLarge: the task is larger than Options.MaxBatchSize (TF
	// Serving: INVALID_ARGUMENT). Returned wrapped in a *SizeError.
	ErrTaskTooLarge = errors.New("sched: task larger than the maximum input batch size")
	// ErrEmptyTask: the task has no rows.
	ErrEmptyTask = errors.New("sched: task size must be positive")
	// ErrExpired: every task of a batch had passed its deadline when a batch
	// thread took it, so the batch was not executed (TF Serving:
	// RESOURCE_EXHAUSTED "Run() timeout exceeded while waiting in batching
	// queue").
	ErrExpired = errors.New("sched: run timeout exceeded while waiting in batching queue")
	// ErrClosed: Submit after Close.
	ErrClosed = errors.New("sched: scheduler closed")
	// ErrOptions: New was given invalid options.
	ErrOptions = errors.New("sched: invalid options")
)

// SizeError is the error for a task larger than the scheduler accepts.
type SizeError struct {
	Size, Max int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("sched: task size %d is larger than maximum input batch size %d", e.Size, e.Max)
}

// Unwrap makes errors.Is(err, ErrTaskTooLarge) hold.
func (e *SizeError) Unwrap() error { return ErrTaskTooLarge }
