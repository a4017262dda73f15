// Package filestamp tells whether a file custody read may have changed
// since, for the files it reads again without a restart (the static token
// file, tenant policies).
//
// A [Stamp] is a file's device, inode, size, modification time and change
// time, as [os.Stat] gives them (after symlinks). A file written in place,
// or another file put in its place (a rename, a swapped symlink), has
// another stamp, even when its size and modification time were kept (cp
// -p, rsync -a, tar, a Nix store path with mtime 1): the change time
// cannot be set by a user. Timestamps come from a coarse clock, so a
// write within the same tick as a read leaves the stamp as it was; a
// stamp whose change time is within [RacyWindow] of now is therefore not
// settled, and the file must be read again at its next use. On platforms
// whose stat gives no change time ([Of] in stamp_other.go) no stamp is
// settled: the file is read at every use.
package filestamp

import (
	"os"
	"time"
)

// Stamp identifies one version of a file. The zero Stamp is no version.
type Stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // Unix nanoseconds
}

// RacyWindow is how recent a file's change time may be for its stamp not
// to be trusted: 2 s, well above the timestamp granularity of common file
// systems.
const RacyWindow = 2 * time.Second

// Of returns fi's stamp (fi from os.Stat) and whether it is settled:
// false when the file's change time is within RacyWindow of now or the
// platform gives none, in which case the caller reads the file again at
// its next use whatever the stamp.
func Of(fi os.FileInfo, now time.Time) (Stamp, bool) {
	s, ctime, ok := stat(fi)
	if !ok {
		return Stamp{}, false
	}
	return s, now.Sub(ctime) >= RacyWindow
}
