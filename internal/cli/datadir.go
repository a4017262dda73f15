package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// checkDataDir refuses a data directory (flag names it in errors) that
// another user could have filled before custody started: one that
// belongs to a user other than this process's or root, or in which a
// file custody reads (names: the database, its log, the default key
// files) exists and is not a regular file or belongs to such a user.
// Whoever wrote the database or a key there would hold identities or the
// key every token is checked with. A missing directory passes (whoever
// uses it first creates it 0700). The mode is not checked: a Kubernetes
// emptyDir is root's and 0777, reachable only from its pod; a
// directory another user owns can be made writable by them at any time.
func checkDataDir(flag, dir string, names ...string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s is not a directory", flag, dir)
	}
	if uid, ok := foreignOwner(fi); ok {
		return fmt.Errorf("%s %s belongs to another user (uid %d), who could have put a database or key there: use a directory of your own", flag, dir, uid)
	}
	for _, n := range names {
		path := filepath.Join(dir, n)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file (%v): remove it", flag, path, fi.Mode().Type())
		}
		if uid, ok := foreignOwner(fi); ok {
			return fmt.Errorf("%s: %s belongs to another user (uid %d): custody would use what they wrote; remove it", flag, path, uid)
		}
	}
	return nil
}

// foreignOwner reports the owner of fi if it is neither this process's
// effective user nor root.
func foreignOwner(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, st.Uid != 0 && int(st.Uid) != os.Geteuid()
}
