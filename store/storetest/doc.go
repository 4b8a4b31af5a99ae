// Package storetest opens throwaway stores for tests of any package that
// keeps data in a store (the tuner, the daemon's API): Open gives a store
// in the test's temporary directory, and when the test ends the store is
// closed and bbolt's consistency check (tx.Check) runs over the file, so a
// test that leaves it inconsistent fails.
package storetest
