//go:build !unix

package agenthook

import (
	"context"
	"errors"
	"time"
)

// lockFile refuses where there is no flock(2) (not a Unix system): without
// the lock two hook processes could register two runs, so hooks fail closed.
func lockFile(context.Context, string, time.Duration) (func(), error) {
	return nil, errors.New("session state locking needs a Unix system")
}
