// Package latch records, once, that a server ended and how: the shared
// bookkeeping behind every runtime's Server.Done and Server.Exit.
package latch
