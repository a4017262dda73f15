package gateway

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// maxKeyFile bounds a provider key file; real keys are under 256 bytes.
const maxKeyFile = 16 << 10

// keyFiles holds the real provider keys read from one file per provider
// in a directory, re-read when a file's mtime, size or inode changes.
type keyFiles struct {
	dir   string
	names []string
	log   *slog.Logger

	// stamps is owned by refresh (called from New, then only from the
	// poller goroutine).
	stamps map[string]fileStamp
	cur    atomic.Pointer[map[string]string]
}

type fileStamp struct {
	mtime time.Time
	size  int64
	ino   uint64
	ok    bool
}

func newKeyFiles(dir string, names []string, log *slog.Logger) *keyFiles {
	k := &keyFiles{dir: dir, names: names, log: log, stamps: make(map[string]fileStamp)}
	empty := map[string]string{}
	k.cur.Store(&empty)
	return k
}

// get returns provider p's key, or "" if the gateway holds none.
func (k *keyFiles) get(p string) string { return (*k.cur.Load())[p] }

// refresh re-reads the key files that changed since the last call.
func (k *keyFiles) refresh(ctx context.Context) {
	if k.dir == "" {
		return
	}
	old := *k.cur.Load()
	var next map[string]string
	for _, name := range k.names {
		path := filepath.Join(k.dir, name)
		st := stampOf(path)
		if st == k.stamps[name] {
			continue
		}
		k.stamps[name] = st
		key := ""
		if st.ok {
			var err error
			if key, err = readKeyFile(path); err != nil {
				k.log.WarnContext(ctx, "provider key file unusable", "provider", name, "err", err)
				key = ""
			}
		}
		if key == old[name] {
			continue
		}
		if next == nil {
			next = make(map[string]string, len(k.names))
			for n, v := range old {
				next[n] = v
			}
		}
		if key == "" {
			delete(next, name)
			k.log.InfoContext(ctx, "provider key removed", "provider", name)
		} else {
			next[name] = key
			k.log.InfoContext(ctx, "provider key loaded", "provider", name)
		}
	}
	if next != nil {
		k.cur.Store(&next)
	}
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return fileStamp{}
	}
	st := fileStamp{mtime: fi.ModTime(), size: fi.Size(), ok: true}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = uint64(sys.Ino)
	}
	return st
}

var errBadKey = errors.New("key is empty, too long or holds characters not allowed in a header")

// readKeyFile reads and trims a key file. The error never holds the
// file's content.
func readKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return "", pe.Err
		}
		return "", errors.New("read failed")
	}
	if len(b) > maxKeyFile {
		return "", errBadKey
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", nil
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return "", errBadKey
		}
	}
	return key, nil
}
