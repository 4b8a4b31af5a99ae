// Package ports picks free TCP ports and checks that a fixed one is free,
// for runtimes that choose where a trial server listens.
package ports
