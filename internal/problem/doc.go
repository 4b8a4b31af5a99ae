// Package problem is the collection of validation problems, each named by
// its field path, that every package of batchtune reports bad input with.
// It is configs.Problems (an alias); it lives here, below configs, so that
// packages configs imports (objective) can report problems too.
package problem
