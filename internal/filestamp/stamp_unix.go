//go:build linux || openbsd || darwin || freebsd || netbsd

package filestamp

import (
	"os"
	"syscall"
	"time"
)

func stat(fi os.FileInfo) (Stamp, time.Time, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Stamp{}, time.Time{}, false
	}
	ctime := ctimeOf(st)
	return Stamp{
		dev: uint64(st.Dev), ino: uint64(st.Ino), size: fi.Size(),
		mtime: fi.ModTime().UnixNano(), ctime: ctime.UnixNano(),
	}, ctime, true
}
