// Package storetest is the conformance suite of custody's stores: each
// function runs every behavioural check of one store interface's
// contract, as subtests, against any implementation, the way
// testing/fstest checks a file system. The embedded SQLite store and the
// PostgreSQL store both run it.
//
// Times: the suites of keys, gateway tokens and the witness use
// whole-second UTC times (those stores keep seconds); the memory,
// signer and metering suites use millisecond times (those stores keep
// milliseconds). All compare with time.Time.Equal.
//
// Each ...Replicas function takes several handles on one fresh database
// (as several replicas or processes hold: two pools on one PostgreSQL
// schema, two opens of one SQLite file) and races them against each
// other; given one handle several times it races goroutines of one
// process.
package storetest
