//go:build !(linux || openbsd || darwin || freebsd || netbsd)

package filestamp

import (
	"os"
	"time"
)

// stat reports no stamp: the platform's stat gives no change time.
func stat(os.FileInfo) (Stamp, time.Time, bool) {
	return Stamp{}, time.Time{}, false
}
