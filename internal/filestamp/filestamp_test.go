package filestamp

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func statStamp(t *testing.T, path string, now time.Time) (Stamp, bool) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return Of(fi, now)
}

// A file rewritten with the same size and modification time, in place or
// by a swapped symlink, has another stamp; a stamp is settled only once
// its change time is RacyWindow old.
func TestOf(t *testing.T) {
	dir := t.TempDir()
	mtime := time.Unix(1, 0)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a", "one")
	s1, settled := statStamp(t, a, time.Now())
	if settled {
		t.Error("a stamp taken just after the write is settled")
	}
	if s1 == (Stamp{}) {
		t.Fatal("no stamp on this platform")
	}
	if _, settled := statStamp(t, a, time.Now().Add(RacyWindow+time.Second)); !settled {
		t.Error("a stamp older than RacyWindow is not settled")
	}
	if again, _ := statStamp(t, a, time.Now()); again != s1 {
		t.Error("the stamp of an unchanged file changed")
	}
	time.Sleep(10 * time.Millisecond)
	write("a", "two")
	if s2, _ := statStamp(t, a, time.Now()); s2 == s1 {
		t.Error("a file rewritten in place with its size and mtime kept has the same stamp")
	}

	link := filepath.Join(dir, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	s3, _ := statStamp(t, link, time.Now())
	b := write("b", "two")
	tmp := filepath.Join(dir, "tmp")
	if err := os.Symlink(b, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	if s4, _ := statStamp(t, link, time.Now()); s4 == s3 {
		t.Error("a swapped symlink to a file of the same size and mtime has the same stamp")
	}
}
